//! Measures the embedded directory at SPECmail2001 scale: writes N users (default
//! 1,500,000, as in the 7,500-MPM result) in one bulk add, then times opening the
//! directory (the server's start-up), lookups, and the file size and memory used.
//!
//! `cargo run --release -p stoa-directory --example directory_load -- [USERS] [DIR]`
//!
//! With a DIR that already holds a directory, nothing is written: the run measures
//! the load in a fresh process, so the memory figure is the loaded directory's alone.
//!
//! Every user gets a real argon2id PHC string of the default cost (one hash, reused,
//! so the run does not spend hours hashing), so the file has its real size.

#![allow(clippy::print_stdout, reason = "a measuring program reports on stdout")]

use std::path::PathBuf;
use std::time::Instant;

use stoa_directory::embedded::NewUser;
use stoa_directory::password::hash_password;
use stoa_directory::{Directory, EmbeddedDirectory, Options, PasswordCost};

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let users: usize = args.next().map_or(Ok(1_500_000), |a| a.parse())?;
    let dir = args.next().map(PathBuf::from);
    let tmp = tempfile::tempdir()?;
    let dir = dir.unwrap_or_else(|| tmp.path().join("directory"));
    let options = Options {
        cache_capacity: 0,
        ..Options::default()
    };

    if !dir.join("entries.txt").exists() {
        create(&dir, users, &options)?;
    }
    let size = std::fs::metadata(dir.join("entries.txt"))?.len();
    let before = rss_mib();
    let start = Instant::now();
    let directory = EmbeddedDirectory::open(&dir, options)?;
    let load = start.elapsed();
    let users = directory.user_count();
    println!(
        "file size: {:.1} MB ({:.0} B/user)",
        size as f64 / 1e6,
        size as f64 / users as f64
    );
    println!(
        "open (load {users} users): {:.2} s, RSS {before:.0} MiB -> {:.0} MiB",
        load.as_secs_f64(),
        rss_mib()
    );

    let lookups = 1_000_000;
    let start = Instant::now();
    let mut found = 0;
    for i in 0..lookups {
        let n = (i * 7919) % users;
        let address = format!("user{n}@mail{}.example.com", n % 5);
        found += usize::from(directory.lookup(&address)?.is_some());
    }
    let per = start.elapsed().as_secs_f64() / lookups as f64;
    println!("lookup: {:.2} µs each ({found}/{lookups} found)", per * 1e6);

    let start = Instant::now();
    directory.add_user(
        &format!("one.more{}@mail0.example.com", std::process::id()),
        None,
    )?;
    println!(
        "one add_user at this size (rewrite): {:.2} s",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Writes `users` users into a new directory in one bulk add.
fn create(
    dir: &std::path::Path,
    users: usize,
    options: &Options,
) -> Result<(), Box<dyn std::error::Error>> {
    let phc = hash_password("benchmark", &PasswordCost::default())?;
    let batch: Vec<NewUser> = (0..users)
        .map(|i| NewUser {
            address: format!("user{i}@mail{}.example.com", i % 5),
            password_hash: Some(phc.clone()),
        })
        .collect();
    {
        let directory = EmbeddedDirectory::open(dir, options.clone())?;
        for d in 0..5 {
            directory.add_domain(&format!("mail{d}.example.com"))?;
        }
        let start = Instant::now();
        directory.add_users(&batch)?;
        println!(
            "bulk add of {users} users: {:.2} s",
            start.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
