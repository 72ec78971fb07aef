//! The SPECweb99 client's workload (`web99.md` §3, §4): which file, which request
//! type, how many requests per connection, and the exact request bytes.
//!
//! The random machinery is the kit's: the Park–Miller minimal-standard generator
//! (Schrage's method) and its Zipf table, so a harness seeded like the kit's
//! clients (`2331 + 256 × client`) draws the same kind of streams.
//!
//! Choices where the spec is uncertain (§10.4): the deck holds [`DEFAULT_DECK`]
//! entries (the Singularity port's 1000; the original's default may have been 100),
//! and its class counts are the class probabilities times the deck size, rounded,
//! with class 1 taking the rounding remainder so the total is exact.

use crate::fileset::FileId;

/// Share of requests per class (§3.1).
pub const CLASS_MIX: [f64; 4] = [0.35, 0.50, 0.14, 0.01];
/// Zipf rank → file number within a class (§3.2).
pub const FILE_ORDER: [u8; 9] = [4, 3, 5, 2, 6, 1, 7, 8, 0];
/// Share of all requests that are dynamic (§4.1).
pub const DYNAMIC_CONTENT: f64 = 0.30;
/// Share of dynamic requests that are POSTs.
pub const DYNAMIC_POST: f64 = 0.16;
/// Share of dynamic requests that are custom-ad-rotation GETs.
pub const DYNAMIC_CAD_GET: f64 = 0.42;
/// Share of dynamic requests that are CGI GETs.
pub const DYNAMIC_CGI_GET: f64 = 0.005;
/// Requests per keep-alive connection on average (§4.3).
pub const REQUESTS_PER_KEEP_ALIVE: u32 = 10;
/// Share of requests carried on keep-alive connections.
pub const PERCENT_KEEP_ALIVE_REQUESTS: f64 = 0.7;
/// Entries in one deck.
pub const DEFAULT_DECK: usize = 1000;
/// Seed of client `n`'s generator, as the manager sets it.
pub fn client_seed(client: u32) -> i32 {
    2331 + 256 * client as i32
}

/// The kit's uniform generator: `seed = 16807 × seed mod (2³¹ − 1)` (Schrage).
#[derive(Debug, Clone)]
pub struct SpecRng {
    seed: i32,
}

impl SpecRng {
    const M: i32 = 2_147_483_647;
    const A: i32 = 16_807;
    const Q: i32 = 127_773;
    const R: i32 = 2_836;

    /// A generator; a seed of 0 (which would stick at 0) is replaced by 1.
    pub fn new(seed: i32) -> SpecRng {
        let seed = seed.rem_euclid(Self::M);
        SpecRng {
            seed: if seed == 0 { 1 } else { seed },
        }
    }

    /// The next value in (0, 1).
    pub fn next_f64(&mut self) -> f64 {
        let hi = self.seed / Self::Q;
        let lo = self.seed % Self::Q;
        let t = Self::A * lo - Self::R * hi;
        self.seed = if t > 0 { t } else { t + Self::M };
        f64::from(self.seed) / f64::from(Self::M)
    }

    /// A uniform index in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_f64() * n as f64) as usize).min(n.saturating_sub(1))
    }
}

/// The kit's Zipf sampler over `0..n` with exponent `z` (§3.4).
#[derive(Debug, Clone)]
pub struct Zipf {
    table: Vec<f64>,
}

impl Zipf {
    /// The table for `n` values: `T[0] = 1`, `T[k] = 1 − H(k)/H(n)`, `T[n] = 0`.
    pub fn new(n: usize, z: f64) -> Zipf {
        let n = n.max(1);
        let h: f64 = (1..=n).map(|j| 1.0 / (j as f64).powf(z)).sum();
        let mut table = Vec::with_capacity(n + 1);
        table.push(1.0);
        let mut partial = 0.0;
        for k in 1..n {
            partial += 1.0 / (k as f64).powf(z);
            table.push(1.0 - partial / h);
        }
        table.push(0.0);
        Zipf { table }
    }

    /// Draws a value: the smallest `i ≥ 1` with `u ≥ T[i]`, minus one.
    pub fn sample(&self, rng: &mut SpecRng) -> usize {
        let u = rng.next_f64();
        // T is decreasing: find the first index whose value u reaches.
        let i = self.table[1..].partition_point(|&t| u < t) + 1;
        (i - 1).min(self.table.len() - 2)
    }

    /// Probability of value `k`.
    pub fn probability(&self, k: usize) -> f64 {
        self.table[k] - self.table[k + 1]
    }
}

/// What kind of request a deck entry is (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestType {
    /// Static GET of the file.
    Static,
    /// Standard dynamic GET through the server's module.
    Dynamic,
    /// Standard dynamic GET through a CGI program.
    Cgi,
    /// Dynamic GET with custom ad rotation.
    Cad,
    /// Dynamic POST.
    Post,
}

impl RequestType {
    /// The type for a uniform draw `u`, by the client's thresholds (§4.2).
    pub fn from_uniform(u: f64) -> RequestType {
        let post = DYNAMIC_CONTENT * DYNAMIC_POST;
        let cad = post + DYNAMIC_CONTENT * DYNAMIC_CAD_GET;
        let cgi = cad + DYNAMIC_CONTENT * DYNAMIC_CGI_GET;
        if u < post {
            RequestType::Post
        } else if u < cad {
            RequestType::Cad
        } else if u < cgi {
            RequestType::Cgi
        } else if u < DYNAMIC_CONTENT {
            RequestType::Dynamic
        } else {
            RequestType::Static
        }
    }

    /// Whether the request goes to the dynamic API (or CGI).
    pub fn is_dynamic(self) -> bool {
        self != RequestType::Static
    }

    /// All types, in report order.
    pub const ALL: [RequestType; 5] = [
        RequestType::Static,
        RequestType::Dynamic,
        RequestType::Cgi,
        RequestType::Cad,
        RequestType::Post,
    ];

    /// The type's share of all requests.
    pub fn share(self) -> f64 {
        match self {
            RequestType::Static => 1.0 - DYNAMIC_CONTENT,
            RequestType::Post => DYNAMIC_CONTENT * DYNAMIC_POST,
            RequestType::Cad => DYNAMIC_CONTENT * DYNAMIC_CAD_GET,
            RequestType::Cgi => DYNAMIC_CONTENT * DYNAMIC_CGI_GET,
            RequestType::Dynamic => {
                DYNAMIC_CONTENT * (1.0 - DYNAMIC_POST - DYNAMIC_CAD_GET - DYNAMIC_CGI_GET)
            }
        }
    }
}

/// One request of a deck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The file.
    pub file: FileId,
    /// How it is requested.
    pub kind: RequestType,
}

/// Class counts of a deck of `size` entries: proportional, rounded, exact total.
pub fn class_counts(size: usize) -> [usize; 4] {
    let mut counts = CLASS_MIX.map(|p| (p * size as f64).round() as usize);
    let total: usize = counts.iter().sum();
    counts[1] = (counts[1] + size).saturating_sub(total);
    counts
}

/// A shuffled deck: exact class proportions; file, directory and type drawn per
/// entry (class first, then file, directory, type, as the client does).
pub fn deck(size: usize, directories: u32, rng: &mut SpecRng) -> Vec<Entry> {
    let mut entries = Vec::new();
    Dealer::new(directories).deal(size, rng, &mut entries);
    entries
}

/// Deals decks over one file set: the two Zipf tables (files within a class,
/// directories) built once, not for every deck: building the directory
/// table costs two `powf` per directory, and a paced load generator deals a
/// new deck every few minutes. The same draws from `rng` as [`deck`], so the
/// same decks.
#[derive(Debug, Clone)]
pub struct Dealer {
    files: Zipf,
    dirs: Zipf,
}

impl Dealer {
    /// For a file set of `directories` directories.
    pub fn new(directories: u32) -> Dealer {
        Dealer {
            files: Zipf::new(FILE_ORDER.len(), 1.0),
            dirs: Zipf::new(directories.max(1) as usize, 1.0),
        }
    }

    /// Replaces `entries` with a shuffled deck of `size` entries.
    pub fn deal(&self, size: usize, rng: &mut SpecRng, entries: &mut Vec<Entry>) {
        entries.clear();
        entries.reserve(size);
        for (class, &count) in class_counts(size).iter().enumerate() {
            for _ in 0..count {
                let num = FILE_ORDER[self.files.sample(rng)];
                let dir = self.dirs.sample(rng) as u32;
                let kind = RequestType::from_uniform(rng.next_f64());
                entries.push(Entry {
                    file: FileId {
                        dir,
                        class: class as u8,
                        num,
                    },
                    kind,
                });
            }
        }
        for i in (1..entries.len()).rev() {
            let j = rng.below(i + 1);
            entries.swap(i, j);
        }
    }
}

/// Share of new connections that are keep-alive: `pct / (RPK × (1 − pct) + pct)`,
/// 18.92 % with the kit's constants (§4.3).
pub fn keep_alive_connection_share() -> f64 {
    let pct = PERCENT_KEEP_ALIVE_REQUESTS;
    pct / (f64::from(REQUESTS_PER_KEEP_ALIVE) * (1.0 - pct) + pct)
}

/// Requests a new connection carries: 1, or for a keep-alive connection a uniform
/// count in 5..=15 (`floor(RPK/2 + u × (RPK + 1))`).
pub fn requests_for_connection(rng: &mut SpecRng) -> u32 {
    if rng.next_f64() >= keep_alive_connection_share() {
        return 1;
    }
    let rpk = f64::from(REQUESTS_PER_KEEP_ALIVE);
    (rpk / 2.0 + rng.next_f64() * (rpk + 1.0)).floor() as u32
}

mod request;
pub use request::{HttpVersion, Targets, format_request};

#[cfg(test)]
mod tests;
