//! The cost of one argon2 password check as the servers make it
//! ([`stoa_directory::password::verify_password`], with the stoa binary's
//! allocator): CPU time (user and system), minor page faults and wall time per
//! check. `bench/argon2-cost.sh` runs it beside libsodium and libargon2 on the
//! same PHC string.
//!
//! `cargo run --release -p stoa-directory --example argon2_cost -- RUNS PASSWORD [PHC]`
//!
//! Without PHC it hashes PASSWORD at the default cost first (untimed) and prints
//! the string. The first check of the process is reported alone (page faults and
//! wall time: it may allocate what later checks reuse), then RUNS more checks
//! together: CPU times from /proc/self/stat are in clock ticks (10 ms), so they
//! are totals over the RUNS divided by RUNS. Under callgrind, the difference
//! between two RUNS counts' instructions divided by the difference is one check.

#![allow(clippy::print_stdout, reason = "a measuring program reports on stdout")]

use std::time::Instant;

use stoa_directory::PasswordCost;
use stoa_directory::password::{hash_password, verify_password};

/// The stoa binary's allocator, so that allocating and freeing the argon2 memory
/// costs here what it costs in the server.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// This process's minor page faults, user and system CPU time (clock ticks) so
/// far: fields 10, 14 and 15 of /proc/self/stat.
fn stat() -> [u64; 3] {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which is in parentheses: field 3 on.
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let field = |n: usize| fields.get(n - 3).copied().unwrap_or(0);
    [field(10), field(14), field(15)]
}

/// Ticks per second of /proc's CPU times (`getconf CLK_TCK`; 100 on Linux).
const TICKS_PER_SEC: f64 = 100.0;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: argon2_cost RUNS PASSWORD [PHC]";
    let runs: u32 = args.first().and_then(|a| a.parse().ok()).expect(usage);
    let password = args.get(1).expect(usage);
    let phc = match args.get(2) {
        Some(phc) => phc.clone(),
        None => {
            let phc = hash_password(password, &PasswordCost::default()).expect("hash");
            println!("phc {phc}");
            phc
        }
    };
    let check = || {
        let ok = verify_password("bench", password, &phc).expect("a valid PHC string");
        assert!(ok, "the password does not match the PHC string");
    };

    let (s0, w0) = (stat(), Instant::now());
    check();
    let (s1, w1) = (stat(), Instant::now());
    println!(
        "first  minflt {} wall_ms {:.3}",
        s1[0] - s0[0],
        (w1 - w0).as_secs_f64() * 1e3
    );
    if runs == 0 {
        return;
    }
    for _ in 0..runs {
        check();
    }
    let (s2, w2) = (stat(), Instant::now());
    let n = f64::from(runs);
    let ms = |ticks: u64| ticks as f64 * 1e3 / TICKS_PER_SEC / n;
    let (user, sys) = (ms(s2[1] - s1[1]), ms(s2[2] - s1[2]));
    println!(
        "steady cpu_ms {:.2} user_ms {user:.2} sys_ms {sys:.2} minflt {:.1} wall_ms {:.2} runs {runs}",
        user + sys,
        (s2[0] - s1[0]) as f64 / n,
        (w2 - w1).as_secs_f64() * 1e3 / n,
    );
}
