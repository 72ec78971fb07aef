//! The `stoa` binary's memory allocator: mimalloc, and the two settings Stoa
//! changes in it (purge at once, no transparent huge pages).
//!
//! **Why mimalloc.** The servers allocate and free large buffers on many threads
//! (argon2's 19 MiB per login, multi-megabyte messages), and glibc's per-thread
//! arenas kept them: a `stoa bench mail` run at 100 msgs/min held 1.8 GB resident
//! where 60 MB were live, and a login storm at 1,500 msgs/min grew the server to
//! 22 GB and got it OOM-killed. mimalloc returns freed pages to the system.
//!
//! **Why purge at once** ([`purge_freed_memory_at_once`]). mimalloc returns a
//! freed page only after a delay (by default 1 s, ten times that for arena
//! memory), and only when the allocator runs again on that thread. A web worker
//! that has just parked thousands of idle keep-alive connections (freeing their
//! tasks and buffers) then sleeps in `epoll_wait`: nothing runs the allocator, so
//! the freed memory stays resident for as long as the connections stay idle.
//! Measured with `bench/idle-memory.sh`, 10,000 connections: 1,678 B per parked
//! connection with the default delay (173 B under glibc's malloc before mimalloc
//! came in), and at or below nothing (-138 B; 72 B with the access log on) when
//! mimalloc purges at once (`bench-results/2026-12-05-vm-idle-memory-purge/`).
//! The same setting given as `MIMALLOC_PURGE_DELAY=0` left the server's CPU per
//! operation unchanged at 1,600 paced connections (48.6 against 48.5 and 49.5 µs,
//! two rounds): a busy worker reuses its pages before they empty.
//!
//! **Why this crate.** Changing a mimalloc option is a foreign call, so it needs
//! `unsafe`, which every other crate forbids. This crate has `unsafe_code` at
//! `deny` and allows it for one block, with its safety argument beside it.

/// The allocator to install with `#[global_allocator]`.
pub use mimalloc::MiMalloc as Allocator;

/// `mi_option_purge_delay` in mimalloc v3's `mi_option_t` (mimalloc.h); the Rust
/// bindings name only the older options. The test below checks it against the
/// option's documented default, so a mimalloc that renumbered its options fails
/// the build's tests rather than changing a different setting.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// `mi_option_allow_thp` in the same enumeration (checked by the test below).
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// mimalloc v3's default purge delay, milliseconds (options.c).
#[cfg(test)]
const DEFAULT_PURGE_DELAY_MS: std::ffi::c_long = 1_000;

/// Makes mimalloc give a page back to the system as soon as it is wholly free,
/// instead of after its delay and only on later allocator activity (see the
/// crate docs for the measurement). Process-wide; call it once, early.
pub fn purge_freed_memory_at_once() {
    #[allow(unsafe_code)]
    // SAFETY: `mi_option_set` stores an integer in mimalloc's option table. It
    // takes no pointers, is safe to call from any thread at any time (the table's
    // entries are read afresh by every purge decision), and mimalloc is the
    // process's allocator, linked in by the `mimalloc` crate, so the symbol is its.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
    }
}

/// Turns transparent huge pages off for the process: `prctl(PR_SET_THP_DISABLE)`,
/// which also covers the arena mimalloc reserved (and advised for huge pages)
/// before `main`, and mimalloc's own option, so it advises no new mapping.
///
/// **Why.** With huge pages a 2 MiB region becomes resident as a whole as soon as
/// a few objects live in it, and mimalloc's purge of a freed page inside it gives
/// nothing back. Measured with `bench/idle-memory.sh --protocol imap` style runs
/// (2,000 IMAP sessions in IDLE opened 256 at a time): the server grew by 175 MB
/// with them, 24 MB without, and its resident size before any session fell from
/// 22 to 9 MB. Where the kernel's THP setting is `madvise` (Debian's default) only
/// mimalloc's advice turned them on. The web's CPU per paced operation did not
/// move (`stoa bench peers --workload web99`, 1,600 connections, against the build
/// before: 0.98× [0.89, 1.10] over 5 rounds, on a machine busy with builds).
pub fn no_transparent_huge_pages() -> std::io::Result<()> {
    #[allow(unsafe_code)]
    // SAFETY: as in `purge_freed_memory_at_once`: an integer stored in mimalloc's
    // option table, read afresh at each new mapping; no pointers.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0);
    }
    rustix::thread::disable_transparent_huge_pages(true).map_err(std::io::Error::from)
}

/// The purge delay in force, milliseconds.
#[cfg(test)]
fn purge_delay_ms() -> std::ffi::c_long {
    #[allow(unsafe_code)]
    // SAFETY: `mi_option_get` reads an integer from mimalloc's option table (on
    // first use, from its `MIMALLOC_` environment variable); no pointers.
    unsafe {
        libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test, because the option is process-wide: the index names the purge
    /// delay (its default is the documented one, unless the environment set it)
    /// and setting it takes.
    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(
                purge_delay_ms(),
                DEFAULT_PURGE_DELAY_MS,
                "option {MI_OPTION_PURGE_DELAY} is not mimalloc's purge delay"
            );
        }
        purge_freed_memory_at_once();
        assert_eq!(purge_delay_ms(), 0);
    }

    /// The THP option's index names `allow_thp` (default on), and the process
    /// flag takes.
    #[test]
    fn transparent_huge_pages_go_off() {
        #[allow(unsafe_code)]
        // SAFETY: reads an integer from mimalloc's option table; no pointers.
        let allowed = || unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_ALLOW_THP) };
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
            assert_eq!(
                allowed(),
                1,
                "option {MI_OPTION_ALLOW_THP} is not allow_thp"
            );
        }
        no_transparent_huge_pages().expect("prctl");
        assert_eq!(allowed(), 0);
        assert!(rustix::thread::transparent_huge_pages_are_disabled().expect("prctl"));
    }
}
