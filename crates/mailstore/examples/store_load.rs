//! Measures the two mail store designs at SPECmail2001's steady state (mail2001.md
//! §1.11): N mailboxes filled with the benchmark's message-count distribution (mean
//! 3.43) and size mix (mean 24.5 KiB), delivered durably one by one, then per-operation
//! latencies on random mailboxes.
//!
//! - `maildir`: this crate's [`MailStore`] (one file per message, hard links).
//! - `embedded`: a prototype of the alternative: messages appended to 1 GiB segment
//!   files (`fdatasync` per delivery) and indexed in redb (one durable commit per
//!   delivery or deletion), with the per-message reference counts and per-segment dead
//!   bytes that a compactor would need (the compactor itself is not written).
//!
//! `cargo run --release -p stoa-mailstore --example store_load -- [MAILBOXES] [OPS] [DESIGN] [THREADS] [DIR]`
//!
//! MAILBOXES defaults to 10,000, OPS (samples per operation) to 1,000, DESIGN to
//! `both` (or `maildir`, `embedded`), THREADS (concurrent deliveries during the load,
//! as an SMTP server's sessions would make them) to 1; the stores are made in a temporary directory under DIR (default the system
//! temp dir) and deleted after each design. Both designs get the same pseudo-random
//! sequence. Reads hit the page cache (the run does not drop caches: it would disturb
//! whatever else runs on the machine).

#![allow(clippy::print_stdout, reason = "a measuring program reports on stdout")]

use std::error::Error;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use stoa_mailstore::{MailStore, MailboxId, Options};

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// Messages per mailbox at steady state, in hundredths of a percent (WP Table 2).
const COUNTS: [u32; 30] = [
    2650, 1611, 1225, 961, 756, 595, 468, 369, 290, 229, 180, 142, 112, 88, 69, 54, 43, 34, 27, 21,
    16, 13, 10, 8, 6, 5, 4, 3, 2, 2,
];

/// Message sizes in KiB and their shares in hundredths of a percent (§1.6).
const SIZES: [(usize, u32); 10] = [
    (1, 1020),
    (2, 3071),
    (3, 2059),
    (4, 1078),
    (5, 588),
    (6, 374),
    (10, 744),
    (100, 979),
    (1000, 69),
    (2675, 18),
];

const SEED: u64 = 2001;

fn pick(rng: &mut fastrand::Rng, weights: impl Iterator<Item = u32> + Clone) -> usize {
    let total: u32 = weights.clone().sum();
    let mut x = rng.u32(0..total);
    for (i, w) in weights.enumerate() {
        if x < w {
            return i;
        }
        x -= w;
    }
    0
}

/// Makes messages of the mix: a header block and CRLF text lines.
struct Messages {
    body: Vec<u8>,
    next: u64,
}

impl Messages {
    fn new() -> Messages {
        let line =
            b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod te\r\n";
        let body = line.iter().copied().cycle().take(2675 * 1024).collect();
        Messages { body, next: 0 }
    }

    fn make(&mut self, rng: &mut fastrand::Rng) -> Vec<u8> {
        let size = SIZES[pick(rng, SIZES.iter().map(|s| s.1))].0 * 1024;
        self.next += 1;
        let mut m = format!(
            "Received: from client.example (client.example [192.0.2.1])\r\n\tby mx.example \
             with ESMTP id {0}\r\nFrom: <user1@example.com>\r\nTo: <user2@example.com>\r\n\
             Subject: message {0}\r\nMessage-ID: <{0}@client.example>\r\n\r\n",
            self.next
        )
        .into_bytes();
        let rest = size.saturating_sub(m.len());
        m.extend_from_slice(&self.body[..rest]);
        m
    }
}

/// The operations both designs offer.
trait Store {
    fn deliver(&self, message: &[u8], to: &[MailboxId]) -> Res<()>;
    /// Lists the mailbox (for the Maildir store: open a session, i.e. lock and list).
    fn list(&self, id: MailboxId) -> Res<usize>;
    /// Reads the first message; the timer runs only around the read itself.
    fn retrieve_first(&self, id: MailboxId) -> Res<Option<Duration>>;
    /// Deletes the first message; the timer runs only around the deletion.
    fn delete_first(&self, id: MailboxId) -> Res<Option<Duration>>;
}

impl Store for MailStore {
    fn deliver(&self, message: &[u8], to: &[MailboxId]) -> Res<()> {
        MailStore::deliver(self, message, to)?;
        Ok(())
    }

    fn list(&self, id: MailboxId) -> Res<usize> {
        Ok(self.open_mailbox(id)?.messages().len())
    }

    fn retrieve_first(&self, id: MailboxId) -> Res<Option<Duration>> {
        let session = self.open_mailbox(id)?;
        if session.messages().is_empty() {
            return Ok(None);
        }
        let start = Instant::now();
        let bytes = session.read(0)?;
        let took = start.elapsed();
        assert_eq!(bytes.len() as u64, session.messages()[0].size);
        Ok(Some(took))
    }

    fn delete_first(&self, id: MailboxId) -> Res<Option<Duration>> {
        let session = self.open_mailbox(id)?;
        if session.messages().is_empty() {
            return Ok(None);
        }
        let start = Instant::now();
        session.commit_deletes(&[0])?;
        Ok(Some(start.elapsed()))
    }
}

/// (mailbox, sequence) → (segment, offset, length).
const INDEX: TableDefinition<'_, (u64, u64), (u32, u64, u64)> = TableDefinition::new("index");
/// (segment, offset) → mailboxes still holding the message.
const REFS: TableDefinition<'_, (u32, u64), u32> = TableDefinition::new("refs");
/// segment → bytes no mailbox holds any more (what a compactor would reclaim).
const DEAD: TableDefinition<'_, u32, u64> = TableDefinition::new("dead");
/// "seq" → the next message sequence number.
const META: TableDefinition<'_, &str, u64> = TableDefinition::new("meta");

const SEGMENT_BYTES: u64 = 1 << 30;

struct Segment {
    file: File,
    number: u32,
    len: u64,
}

struct Embedded {
    dir: PathBuf,
    db: redb::Database,
    segment: std::sync::Mutex<Segment>,
}

impl Embedded {
    fn open(dir: &Path) -> Res<Embedded> {
        fs::create_dir_all(dir)?;
        let db = redb::Database::create(dir.join("index.redb"))?;
        let txn = db.begin_write()?;
        txn.open_table(INDEX)?;
        txn.open_table(REFS)?;
        txn.open_table(DEAD)?;
        txn.open_table(META)?;
        txn.commit()?;
        let file = Self::segment_file(dir, 0)?;
        let segment = Segment {
            file,
            number: 0,
            len: 0,
        };
        Ok(Embedded {
            dir: dir.to_path_buf(),
            db,
            segment: std::sync::Mutex::new(segment),
        })
    }

    fn segment_file(dir: &Path, number: u32) -> Res<File> {
        let path = dir.join(format!("segment.{number:06}"));
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        File::open(dir)?.sync_all()?;
        Ok(file)
    }
}

impl Store for Embedded {
    fn deliver(&self, message: &[u8], to: &[MailboxId]) -> Res<()> {
        let mut seg = self.segment.lock().map_err(|_| "poisoned")?;
        if seg.len + message.len() as u64 > SEGMENT_BYTES {
            seg.number += 1;
            seg.file = Self::segment_file(&self.dir, seg.number)?;
            seg.len = 0;
        }
        let offset = seg.len;
        seg.file.write_all(message)?;
        seg.file.sync_data()?;
        seg.len += message.len() as u64;
        let txn = self.db.begin_write()?;
        {
            let mut meta = txn.open_table(META)?;
            let seq = meta.get("seq")?.map_or(0, |v| v.value());
            meta.insert("seq", seq + 1)?;
            let mut index = txn.open_table(INDEX)?;
            for id in to {
                index.insert((id.0, seq), (seg.number, offset, message.len() as u64))?;
            }
            let mut refs = txn.open_table(REFS)?;
            refs.insert((seg.number, offset), to.len() as u32)?;
        }
        txn.commit()?;
        Ok(())
    }

    fn list(&self, id: MailboxId) -> Res<usize> {
        let txn = self.db.begin_read()?;
        let index = txn.open_table(INDEX)?;
        let mut n = 0;
        for row in index.range((id.0, 0)..(id.0 + 1, 0))? {
            let (_, v) = row?;
            std::hint::black_box(v.value().2);
            n += 1;
        }
        Ok(n)
    }

    fn retrieve_first(&self, id: MailboxId) -> Res<Option<Duration>> {
        let start = Instant::now();
        let txn = self.db.begin_read()?;
        let index = txn.open_table(INDEX)?;
        let Some(row) = index.range((id.0, 0)..(id.0 + 1, 0))?.next() else {
            return Ok(None);
        };
        let (segment, offset, len) = row?.1.value();
        let file = File::open(self.dir.join(format!("segment.{segment:06}")))?;
        let mut bytes = vec![0; len as usize];
        file.read_exact_at(&mut bytes, offset)?;
        Ok(Some(start.elapsed()))
    }

    fn delete_first(&self, id: MailboxId) -> Res<Option<Duration>> {
        let key = {
            let txn = self.db.begin_read()?;
            let index = txn.open_table(INDEX)?;
            let Some(row) = index.range((id.0, 0)..(id.0 + 1, 0))?.next() else {
                return Ok(None);
            };
            row?.0.value()
        };
        let start = Instant::now();
        let txn = self.db.begin_write()?;
        {
            let mut index = txn.open_table(INDEX)?;
            let (segment, offset, len) = index.remove(key)?.ok_or("vanished")?.value();
            let mut refs = txn.open_table(REFS)?;
            let left = refs.get((segment, offset))?.map_or(1, |v| v.value()) - 1;
            if left == 0 {
                refs.remove((segment, offset))?;
                let mut dead = txn.open_table(DEAD)?;
                let d = dead.get(segment)?.map_or(0, |v| v.value());
                dead.insert(segment, d + len)?;
            } else {
                refs.insert((segment, offset), left)?;
            }
        }
        txn.commit()?;
        Ok(Some(start.elapsed()))
    }
}

fn du(dir: &Path, arg: &str) -> String {
    Command::new("du")
        .args(["-s", arg])
        .arg(dir)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len().max(1) as u32;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "| {name} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
        samples.len(),
        ms(at(0.5)),
        ms(at(0.9)),
        ms(at(0.99)),
        ms(*samples.last().unwrap_or(&Duration::ZERO)),
        ms(mean),
    );
}

/// Fills mailboxes 1..=MAILBOXES, `threads` deliveries at a time (thread t takes the
/// mailboxes ≡ t mod threads, with its own seeded generator, so both designs get the
/// same messages).
fn load(store: &(dyn Store + Sync), mailboxes: u64, threads: u64) -> Res<(u64, u64)> {
    let results: Vec<Res<(u64, u64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| s.spawn(move || load_part(store, mailboxes, t, threads)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("load thread panicked".into()))
            })
            .collect()
    });
    println!();
    let (mut count, mut bytes) = (0, 0);
    for r in results {
        let (c, b) = r?;
        count += c;
        bytes += b;
    }
    Ok((count, bytes))
}

fn load_part(store: &dyn Store, mailboxes: u64, part: u64, parts: u64) -> Res<(u64, u64)> {
    let mut rng = fastrand::Rng::with_seed(SEED + part);
    let mut msgs = Messages::new();
    let (mut count, mut bytes) = (0, 0);
    for id in (1 + part..=mailboxes).step_by(parts as usize) {
        let n = pick(&mut rng, COUNTS.iter().copied());
        if n == 0 {
            // At steady state an empty mailbox has had mail before: its directory exists.
            store.list(MailboxId(id))?;
        }
        for _ in 0..n {
            let m = msgs.make(&mut rng);
            store.deliver(&m, &[MailboxId(id)])?;
            count += 1;
            bytes += m.len() as u64;
        }
        if part == 0 && id % (mailboxes / 10).max(1) < parts {
            print!(".");
            std::io::stdout().flush()?;
        }
    }
    Ok((count, bytes))
}

fn operations(store: &dyn Store, mailboxes: u64, ops: usize, rng: &mut fastrand::Rng) -> Res<()> {
    let mut msgs = Messages::new();
    let mut d1 = Vec::new();
    let mut d10 = Vec::new();
    for _ in 0..ops {
        let m = msgs.make(rng);
        let to = [MailboxId(rng.u64(1..=mailboxes))];
        let start = Instant::now();
        store.deliver(&m, &to)?;
        d1.push(start.elapsed());
        let m = msgs.make(rng);
        let to: Vec<_> = (0..10).map(|_| MailboxId(rng.u64(1..=mailboxes))).collect();
        let start = Instant::now();
        store.deliver(&m, &to)?;
        d10.push(start.elapsed());
    }
    let (mut list, mut retr, mut dele) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ops {
        let id = MailboxId(rng.u64(1..=mailboxes));
        let start = Instant::now();
        std::hint::black_box(store.list(id)?);
        list.push(start.elapsed());
        retr.extend(store.retrieve_first(id)?);
        dele.extend(store.delete_first(id)?);
    }
    println!("| operation | samples | p50 ms | p90 ms | p99 ms | max ms | mean ms |");
    println!("|---|---|---|---|---|---|---|");
    summary("deliver, 1 recipient", d1);
    summary("deliver, 10 recipients", d10);
    summary("list", list);
    summary("retrieve (1st message)", retr);
    summary("delete (1st message)", dele);
    Ok(())
}

fn run(design: &str, dir: &Path, mailboxes: u64, ops: usize, threads: u64) -> Res<()> {
    let mut rng = fastrand::Rng::with_seed(SEED);
    let store: Box<dyn Store + Sync> = match design {
        "maildir" => Box::new(MailStore::open(dir, Options::default())?),
        _ => Box::new(Embedded::open(dir)?),
    };
    println!("## {design}: {mailboxes} mailboxes, loaded by {threads} thread(s)");
    let start = Instant::now();
    let (count, bytes) = load(store.as_ref(), mailboxes, threads)?;
    let took = start.elapsed().as_secs_f64();
    let used_kib: f64 = du(dir, "-k").parse().unwrap_or(0.0);
    let scale = 1_500_000.0 / mailboxes as f64;
    println!(
        "load: {count} messages, {:.0} MiB of messages, {took:.1} s ({:.0} msg/s); \
         du {:.0} MiB ({:.2}x the bytes), {} inodes",
        bytes as f64 / 1048576.0,
        count as f64 / took,
        used_kib / 1024.0,
        used_kib * 1024.0 / bytes as f64,
        du(dir, "--inodes"),
    );
    println!(
        "extrapolated to 1.5 M mailboxes: load {:.1} h, disk {:.0} GiB",
        took * scale / 3600.0,
        used_kib * scale / 1048576.0
    );
    operations(store.as_ref(), mailboxes, ops, &mut rng)?;
    println!("du after operations: {:.0} MiB", {
        let kib: f64 = du(dir, "-k").parse().unwrap_or(0.0);
        kib / 1024.0
    });
    Ok(())
}

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let mailboxes: u64 = args.next().map_or(Ok(10_000), |a| a.parse())?;
    let ops: usize = args.next().map_or(Ok(1_000), |a| a.parse())?;
    let design = args.next().unwrap_or_else(|| "both".into());
    let threads: u64 = args.next().map_or(Ok(1), |a| a.parse())?;
    let parent = args.next().map_or_else(std::env::temp_dir, PathBuf::from);
    let designs: &[&str] = match design.as_str() {
        "maildir" => &["maildir"],
        "embedded" => &["embedded"],
        _ => &["maildir", "embedded"],
    };
    for design in designs {
        let tmp = tempfile::Builder::new()
            .prefix("store-load.")
            .tempdir_in(&parent)?;
        run(
            design,
            &tmp.path().join("store"),
            mailboxes,
            ops,
            threads.max(1),
        )?;
        println!();
    }
    Ok(())
}
