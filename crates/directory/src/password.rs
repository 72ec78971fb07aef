//! Password hashing (argon2id, PHC strings) and the cache of successful checks.
//!
//! # Cost
//!
//! New hashes use [`PasswordCost`], by default m = 19 MiB, t = 2, p = 1: OWASP's
//! first recommendation for argon2id and the `argon2` crate's default. A check costs
//! about what the hash cost when it was made (the parameters travel in the PHC
//! string): at the default, ~18 ms of CPU on one core of the 2-vCPU VM, against
//! ~21 ms for libsodium's `crypto_pwhash_str_verify` (Dovecot's) on the same string
//! (bench/argon2-cost.sh; libsodium's AVX-512 fill needs ~11 ms of user time, but
//! it maps fresh memory for every check and pays ~10 ms of page faults). Raising
//! the cost only affects hashes made afterwards.
//!
//! # Limiter and memory
//!
//! Every argon2 run, hashing or checking, waits for one of the process's slots,
//! one per core (`Slots`), so a login storm queues instead of holding hundreds of
//! 19 MiB runs at once. Each slot keeps its block buffer for the next run rather
//! than allocating and freeing one per run (at most one buffer per slot, up to
//! 64 MiB; larger costs allocate per run): no page faults, no zeroing and no
//! allocator work per check. A kept buffer holds its last run's blocks until the
//! next run overwrites them; the `argon2` crate's own per-run buffers were never
//! zeroed when freed either.
//!
//! # Cache
//!
//! POP3 clients log in every few minutes with the same password, and SPECmail2001's
//! users check mail often (mail2001.md §5.6: Sun's MMP kept an auth cache of 10,000
//! entries for 15 minutes). [`VerifyCache`] remembers, per login, a keyed BLAKE2b tag
//! of (login, password, PHC string) for each *successful* check, so a repeated right
//! password costs a hash of a few hundred bytes instead of an argon2 run.
//!
//! - The password itself is never kept: the tag is keyed with a random per-process
//!   secret, so a memory dump does not give a cheap offline guess either.
//! - The PHC string is part of the tag, so a password change invalidates the entry.
//! - Failures are never cached and never evict: a wrong password always costs a
//!   full argon2 run, so an attacker learns nothing from timing except what a success
//!   tells anyway, and cannot push a user's entry out by guessing.
//! - Tags are compared in constant time ([`blake2`]'s MAC verification).
//! - The cache is bounded (LRU by login) and entries expire after a TTL.

use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use argon2::password_hash::phc::{Output, ParamsString, PasswordHash, Salt};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use blake2::Blake2bMac512;
use blake2::digest::{KeyInit, Mac};
use lru::LruCache;

use crate::error::{Error, Result};

/// Argon2id cost parameters for new hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasswordCost {
    /// Memory in KiB (m). Default 19,456 (19 MiB).
    pub memory_kib: u32,
    /// Passes over the memory (t). Default 2.
    pub iterations: u32,
    /// Lanes (p). Default 1.
    pub parallelism: u32,
}

impl Default for PasswordCost {
    fn default() -> Self {
        PasswordCost {
            memory_kib: Params::DEFAULT_M_COST,
            iterations: Params::DEFAULT_T_COST,
            parallelism: Params::DEFAULT_P_COST,
        }
    }
}

impl PasswordCost {
    /// The cheapest cost argon2 accepts, for tests and for bulk-loading benchmark users
    /// whose passwords are public anyway.
    pub const MINIMUM: PasswordCost = PasswordCost {
        memory_kib: Params::MIN_M_COST,
        iterations: 1,
        parallelism: 1,
    };

    fn hasher(&self) -> Result<Argon2<'static>> {
        let params = Params::new(self.memory_kib, self.iterations, self.parallelism, None)
            .map_err(|e| Error::Hashing(e.to_string()))?;
        Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
    }
}

/// Hashes `password` with a fresh random salt into an argon2id PHC string
/// (`$argon2id$v=19$m=…,t=…,p=…$salt$hash`). Runs in one of the process's
/// argon2 slots, in its memory (see `Slots`).
pub fn hash_password(password: &str, cost: &PasswordCost) -> Result<String> {
    let hashing = |e: &dyn std::fmt::Display| Error::Hashing(e.to_string());
    let argon2 = cost.hasher()?;
    let mut salt = [0u8; Salt::RECOMMENDED_LENGTH];
    getrandom::fill(&mut salt).map_err(|e| hashing(&e))?;
    let mut out = [0u8; Params::DEFAULT_OUTPUT_LEN];
    argon2_slot()
        .run(&argon2, password.as_bytes(), &salt, &mut out)
        .map_err(|e| hashing(&e))?;
    let hash = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(argon2.params()).map_err(|e| hashing(&e))?,
        salt: Some(Salt::new(&salt).map_err(|e| hashing(&e))?),
        hash: Some(Output::new(&out).map_err(|e| hashing(&e))?),
    };
    Ok(hash.to_string())
}

/// Whether `phc` is a PHC string this crate can verify.
pub fn is_valid_hash(phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|h| h.algorithm.as_str().starts_with("argon2"))
}

/// Checks `password` against a PHC string, with the parameters the string carries.
/// `Err` only when the string itself is malformed (`login` names it in the error).
/// Waits its turn: at most one argon2 run per core at once (see `Slots`).
pub fn verify_password(login: &str, password: &str, phc: &str) -> Result<bool> {
    let hash = PasswordHash::new(phc).map_err(|_| Error::InvalidHash(login.to_owned()))?;
    Ok(argon2_slot().verify(password.as_bytes(), &hash))
}

/// The argon2 runs of this process at once: one per core, each in memory the
/// slots keep. A run holds its memory cost (19 MiB by default) for its whole
/// length; unbounded, a login storm on a saturated machine keeps hundreds of runs
/// half-done at once (measured: a `stoa bench mail` load of 50 logins/s on 2
/// cores grew the server to 22 GB and got it OOM-killed). Bounded, the extra
/// logins wait in line holding nothing but a thread, and more runs at once would
/// not finish any sooner.
///
/// The memory: a free slot's block buffer is kept in `spare` for the next run
/// instead of being freed, so at most one buffer per slot exists (and none for a
/// slot never used). A fresh allocation per run (what `Argon2::hash_password`
/// does) costs either a zeroing of the whole buffer (`alloc_zeroed` on memory
/// the allocator kept: mimalloc in a tight loop, ~20 M instructions of the 138 M
/// of a 19 MiB check under callgrind) or a page fault per 4 KiB page when the
/// allocator has handed the pages back to the kernel (4,864 faults, 8-11 ms of
/// system time per check on the 2-vCPU VM: libsodium's figure, which maps fresh
/// memory every time; bench/argon2-cost.sh). A buffer larger than
/// [`KEEP_BLOCKS`] (a hash of an unusually high cost) is freed after its run.
///
/// A kept buffer still holds the blocks of its last run until the next run
/// overwrites them (argon2's first pass writes every block before reading it, so
/// nothing needs clearing for correctness). That is no worse than before: the
/// `argon2` crate does not zero its memory when it frees it (it has no option
/// to), so those blocks stayed in freed heap memory until reused there.
struct Slots {
    state: std::sync::Mutex<SlotState>,
    freed: std::sync::Condvar,
    max: usize,
}

/// What `Slots` guards.
struct SlotState {
    /// Slots held.
    busy: usize,
    /// The buffers of free slots, at most `max - busy` of them.
    spare: Vec<Vec<Block>>,
}

/// Buffers of up to this many 1 KiB blocks are kept between runs: 64 MiB, the
/// cost of libsodium's and Dovecot's default argon2id hashes, so hashes imported
/// from those reuse memory too. Larger ones are allocated per run.
const KEEP_BLOCKS: usize = 64 * 1024;

/// A held slot and its memory; released (the memory kept, see [`Slots`]) on drop.
pub(crate) struct Slot {
    slots: &'static Slots,
    memory: Vec<Block>,
}

impl Slot {
    /// Runs `argon2` on the slot's memory, grown first if its cost needs more.
    fn run(
        &mut self,
        argon2: &Argon2<'_>,
        password: &[u8],
        salt: &[u8],
        out: &mut [u8],
    ) -> argon2::Result<()> {
        let blocks = argon2.params().block_count();
        if self.memory.len() < blocks {
            // Replace rather than extend: nothing in the old blocks is needed,
            // and the old buffer is freed before the new one is written.
            self.memory = Vec::new();
            self.memory = vec![Block::new(); blocks];
        }
        argon2.hash_password_into_with_memory(password, salt, out, &mut self.memory[..blocks])
    }

    /// What the `argon2` crate's `PasswordVerifier::verify_password` does, on the
    /// slot's memory: the algorithm, version, parameters and output length the
    /// string carries, the output compared in constant time ([`Output`]'s `==`).
    fn verify(&mut self, password: &[u8], hash: &PasswordHash) -> bool {
        let (Some(salt), Some(expected)) = (&hash.salt, &hash.hash) else {
            return false;
        };
        let Ok(algorithm) = Algorithm::try_from(hash.algorithm.as_str()) else {
            return false;
        };
        let Ok(version) = hash
            .version
            .map_or(Ok(Version::default()), Version::try_from)
        else {
            return false;
        };
        let Ok(params) = Params::try_from(hash) else {
            return false;
        };
        let argon2 = Argon2::new(algorithm, version, params);
        let mut out = [0u8; Output::MAX_LENGTH];
        let out = &mut out[..expected.len()];
        self.run(&argon2, password, salt, out).is_ok()
            && Output::new(out).is_ok_and(|computed| computed == *expected)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let memory = std::mem::take(&mut self.memory);
        let mut state = self
            .slots
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !memory.is_empty() && memory.len() <= KEEP_BLOCKS {
            state.spare.push(memory);
        }
        state.busy -= 1;
        self.slots.freed.notify_one();
        // A buffer not kept is freed here, after the lock.
    }
}

/// The process's argon2 slots.
fn slots() -> &'static Slots {
    static SLOTS: std::sync::OnceLock<Slots> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| Slots {
        state: std::sync::Mutex::new(SlotState {
            busy: 0,
            spare: Vec::new(),
        }),
        freed: std::sync::Condvar::new(),
        max: crate::verifier::cores(),
    })
}

/// Frees the buffers the free slots keep. A directory calls it after making its
/// decoy hash at start: that run's 19 MiB would otherwise stay resident in a
/// server that has not checked a single argon2 password yet (a third of an idle
/// mail server's memory); the first login allocates it again.
pub(crate) fn release_spare_memory() {
    let spare = {
        let mut state = slots()
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::take(&mut state.spare)
    };
    drop(spare);
}

/// Waits for one of the process's argon2 slots (see [`Slots`]).
pub(crate) fn argon2_slot() -> Slot {
    let slots = slots();
    let mut state = slots
        .state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    while state.busy >= slots.max {
        state = slots
            .freed
            .wait(state)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
    state.busy += 1;
    let memory = state.spare.pop().unwrap_or_default();
    Slot { slots, memory }
}

/// One remembered success.
#[derive(Debug, Clone)]
struct Entry {
    tag: [u8; 64],
    expires: Instant,
}

/// A bounded cache of successful password checks (see the module docs).
///
/// A `std::sync::Mutex` guards the LRU: it is held for a map lookup or insert only,
/// never across I/O or an argon2 run, so contention stays short.
#[derive(Debug)]
pub struct VerifyCache {
    key: [u8; 64],
    ttl: Duration,
    entries: Option<Mutex<LruCache<String, Entry>>>,
}

impl VerifyCache {
    /// A cache of up to `capacity` logins (0 disables it), each kept for `ttl`.
    pub fn new(capacity: usize, ttl: Duration) -> Result<VerifyCache> {
        let mut key = [0u8; 64];
        getrandom::fill(&mut key).map_err(|e| Error::Hashing(e.to_string()))?;
        Ok(VerifyCache {
            key,
            ttl,
            entries: NonZeroUsize::new(capacity).map(|c| Mutex::new(LruCache::new(c))),
        })
    }

    fn mac(&self, login: &str, password: &str, phc: &str) -> Blake2bMac512 {
        let mut mac = <Blake2bMac512 as KeyInit>::new_from_slice(&self.key)
            .expect("invariant: 64 bytes is a valid BLAKE2b key length");
        // Length-prefixed, so no two different triples feed the same bytes.
        for part in [login, password, phc] {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part.as_bytes());
        }
        mac
    }

    /// Whether this exact (login, password, hash) was verified within the TTL.
    pub fn hit(&self, login: &str, password: &str, phc: &str, now: Instant) -> bool {
        let Some(entries) = &self.entries else {
            return false;
        };
        let entry = {
            let mut entries = entries.lock().unwrap_or_else(|e| e.into_inner());
            match entries.get(login) {
                Some(entry) if entry.expires > now => Some(entry.clone()),
                Some(_) => {
                    entries.pop(login);
                    None
                }
                None => None,
            }
        };
        let hit = entry.is_some_and(|entry| {
            self.mac(login, password, phc)
                .verify_slice(&entry.tag)
                .is_ok()
        });
        crate::metrics::count_cache(crate::metrics::Cache::Password, hit);
        hit
    }

    /// Remembers a successful check.
    pub fn insert(&self, login: &str, password: &str, phc: &str, now: Instant) {
        let Some(entries) = &self.entries else {
            return;
        };
        let tag = self.mac(login, password, phc).finalize().into_bytes();
        let mut bytes = [0u8; 64];
        bytes.copy_from_slice(&tag);
        let entry = Entry {
            tag: bytes,
            expires: now + self.ttl,
        };
        let mut entries = entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.put(login.to_owned(), entry);
    }

    /// Number of logins remembered (expired ones included until next touched).
    pub fn len(&self) -> usize {
        self.entries.as_ref().map_or(0, |entries| {
            entries.lock().unwrap_or_else(|e| e.into_inner()).len()
        })
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use argon2::password_hash::{CustomizedPasswordHasher, PasswordVerifier};

    #[test]
    fn hash_and_verify() {
        let phc = hash_password("s3cret", &PasswordCost::MINIMUM).expect("hash");
        assert!(phc.starts_with("$argon2id$v=19$m=8,t=1,p=1$"), "{phc}");
        assert!(is_valid_hash(&phc));
        assert!(verify_password("u", "s3cret", &phc).expect("valid hash"));
        assert!(!verify_password("u", "s3cret ", &phc).expect("valid hash"));
        assert!(!verify_password("u", "", &phc).expect("valid hash"));
        // Salted: the same password hashes differently.
        assert_ne!(
            phc,
            hash_password("s3cret", &PasswordCost::MINIMUM).expect("hash")
        );
        assert!(matches!(
            verify_password("u", "x", "plain"),
            Err(Error::InvalidHash(_))
        ));
        assert!(!is_valid_hash("$md5$abc"));
    }

    /// The slots' own run of the verification agrees with the `argon2` crate's
    /// (which allocates per run) on every algorithm, version, output length and
    /// cost, right and wrong passwords, in both orders of buffer sizes.
    #[test]
    fn verify_agrees_with_the_argon2_crate() {
        let mut phcs = Vec::new();
        for (alg, version, m, t, p, len) in [
            (Algorithm::Argon2id, Version::V0x13, 8, 1, 1, 32),
            (Algorithm::Argon2id, Version::V0x13, 64, 3, 2, 16),
            (Algorithm::Argon2i, Version::V0x13, 32, 2, 1, 32),
            (Algorithm::Argon2d, Version::V0x10, 16, 2, 1, 64),
            (Algorithm::Argon2id, Version::V0x10, 128, 1, 4, 24),
            (Algorithm::Argon2id, Version::V0x13, 19456, 2, 1, 32),
        ] {
            let params = Params::new(m, t, p, Some(len)).expect("params");
            let hash = Argon2::default()
                .hash_password_customized(
                    b"right",
                    b"salt-of-16-bytes",
                    Some(alg.ident().as_str()),
                    Some(version.into()),
                    params,
                )
                .expect("hash");
            phcs.push(hash.to_string());
        }
        // Our own hashes, at two costs.
        phcs.push(hash_password("right", &PasswordCost::MINIMUM).expect("hash"));
        phcs.push(hash_password("right", &PasswordCost::default()).expect("hash"));
        for phc in phcs.iter().chain(phcs.iter().rev()) {
            let hash = PasswordHash::new(phc).expect("phc");
            for password in ["right", "wrong", "", "right\0"] {
                let theirs = Argon2::default()
                    .verify_password(password.as_bytes(), &hash)
                    .is_ok();
                assert_eq!(
                    verify_password("u", password, phc).expect("valid"),
                    theirs,
                    "{phc} {password:?}"
                );
                assert_eq!(theirs, password == "right", "{phc} {password:?}");
            }
        }
        // Strings the crate rejects when verifying, we reject too (no salt, no hash).
        for phc in [
            "$argon2id$v=19$m=8,t=1,p=1",
            "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ",
        ] {
            assert!(
                !verify_password("u", "right", phc).unwrap_or(false),
                "{phc}"
            );
        }
    }

    #[test]
    fn slots_keep_at_most_one_buffer_each() {
        let max = crate::verifier::cores();
        let phc = hash_password("pw", &PasswordCost::MINIMUM).expect("hash");
        std::thread::scope(|scope| {
            for _ in 0..max * 3 {
                scope.spawn(|| assert!(verify_password("u", "pw", &phc).expect("valid")));
            }
        });
        let slot = argon2_slot();
        let state = slot
            .slots
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        assert!(state.spare.len() < max, "{} spare", state.spare.len());
    }

    #[test]
    fn default_cost_is_owasp() {
        let phc = hash_password("x", &PasswordCost::default()).expect("hash");
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        let bad = PasswordCost {
            memory_kib: 1,
            ..PasswordCost::default()
        };
        assert!(matches!(hash_password("x", &bad), Err(Error::Hashing(_))));
    }

    #[test]
    fn cache_accepts_only_the_exact_triple() {
        let cache = VerifyCache::new(2, Duration::from_secs(60)).expect("cache");
        let now = Instant::now();
        cache.insert("joe@x", "right", "$phc1", now);
        assert!(cache.hit("joe@x", "right", "$phc1", now));
        assert!(!cache.hit("joe@x", "wrong", "$phc1", now));
        assert!(
            !cache.hit("joe@x", "right", "$phc2", now),
            "password changed"
        );
        assert!(!cache.hit("ann@x", "right", "$phc1", now));
        // Expiry.
        assert!(cache.hit("joe@x", "right", "$phc1", now + Duration::from_secs(59)));
        assert!(!cache.hit("joe@x", "right", "$phc1", now + Duration::from_secs(60)));
        assert!(cache.is_empty(), "expired entry dropped");
        // Bounded: the least recently used login goes.
        for login in ["a@x", "b@x", "c@x"] {
            cache.insert(login, "p", "$h", now);
        }
        assert_eq!(cache.len(), 2);
        assert!(!cache.hit("a@x", "p", "$h", now));
        assert!(cache.hit("c@x", "p", "$h", now));
        // Disabled.
        let off = VerifyCache::new(0, Duration::from_secs(60)).expect("cache");
        off.insert("joe@x", "right", "$phc1", now);
        assert!(!off.hit("joe@x", "right", "$phc1", now));
    }

    #[test]
    fn argon2_runs_at_most_one_per_core() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let max = crate::verifier::cores();
        let (now, peak) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let hash = hash_password("pw", &PasswordCost::MINIMUM).expect("hash");
        std::thread::scope(|scope| {
            for _ in 0..max * 4 {
                scope.spawn(|| {
                    for _ in 0..3 {
                        let slot = argon2_slot();
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(n, Ordering::SeqCst);
                        // Real work inside the slot, so the threads overlap.
                        let _ = Argon2::default()
                            .verify_password(b"pw", &PasswordHash::new(&hash).expect("phc"));
                        now.fetch_sub(1, Ordering::SeqCst);
                        drop(slot);
                    }
                });
            }
        });
        assert!(
            peak.load(Ordering::SeqCst) <= max,
            "{} > {max}",
            peak.load(Ordering::SeqCst)
        );
        assert_eq!(now.load(Ordering::SeqCst), 0);
        // And the public functions still work (they take slots themselves).
        assert!(verify_password("joe@x", "pw", &hash).expect("verify"));
    }
}
