//! `stoa fileset`: writes (or verifies) the SPECweb99 file set under a document root.
//!
//! Every file is written to a temporary name in its directory and renamed into place,
//! so an interrupted run (or a full disk) never leaves a half-written file under a
//! real name; leftover temporary files are removed by the next run. Existing files
//! are read and checked byte by byte: valid ones are kept, anything else is
//! rewritten, so running the command twice is cheap and safe. Directories are spread
//! over one thread per core.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use stoa_web99::fileset::{self, DIRECTORY_BYTES, FileId};

use crate::cli::FilesetArgs;

/// Suffix of files being written; never a name the file set uses.
const TMP_SUFFIX: &str = ".tmp";

/// What one run did.
#[derive(Debug, Default)]
struct Tally {
    written: AtomicU64,
    written_bytes: AtomicU64,
    kept: AtomicU64,
    invalid: AtomicU64,
    missing: AtomicU64,
}

/// Shared state of the worker threads.
struct Job<'a> {
    root: &'a Path,
    seed: u64,
    verify_only: bool,
    next_dir: AtomicU32,
    dirs: u32,
    stop: AtomicBool,
    first_error: Mutex<Option<anyhow::Error>>,
    tally: Tally,
    progress: ProgressBar,
}

/// Runs the command.
pub(crate) fn run(args: &FilesetArgs) -> anyhow::Result<()> {
    write(args, true)
}

/// Writes (or verifies) the file set; prints the summary when `print` is set.
pub(crate) fn write(args: &FilesetArgs, print: bool) -> anyhow::Result<()> {
    let dirs = fileset::directories(args.connections);
    check_target(&args.dir, args.force)?;
    let root = args.dir.join("file_set");
    if !args.verify {
        fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
        check_space(&root, dirs)?;
    } else if !root.is_dir() {
        bail!("{} holds no file set to verify", args.dir.display());
    }
    let progress = ProgressBar::new(u64::from(dirs) * DIRECTORY_BYTES);
    progress.set_style(
        ProgressStyle::with_template(
            "{msg:>12} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        )
        .expect("invariant: valid template")
        .progress_chars("=> "),
    );
    let job = Job {
        root: &root,
        seed: args.seed,
        verify_only: args.verify,
        next_dir: AtomicU32::new(0),
        dirs,
        stop: AtomicBool::new(false),
        first_error: Mutex::new(None),
        tally: Tally::default(),
        progress,
    };
    let started = Instant::now();
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| job.work());
        }
    });
    job.progress.finish_and_clear();
    if let Some(e) = job.first_error.lock().ok().and_then(|mut e| e.take()) {
        return Err(e);
    }
    if let Some(dir) = &args.cgi_dir {
        install_cgi(dir, print)?;
    }
    if !print {
        return Ok(());
    }
    report(args, &job, started.elapsed().as_secs_f64())
}

/// Installs `DIR/web99`, a script that runs this binary as the SPECweb99 CGI
/// program.
#[allow(
    clippy::print_stdout,
    reason = "the command's report goes to standard output"
)]
fn install_cgi(dir: &Path, print: bool) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let exe = std::env::current_exe().context("cannot find the stoa binary")?;
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join("web99");
    let quoted = exe.display().to_string().replace('\'', "'\\''");
    let script = format!(
        "#!/bin/sh\n# SPECweb99 CGI GET: see `stoa web99-cgi --help`.\nexec '{quoted}' web99-cgi\n"
    );
    write_atomically(&path, script.as_bytes())?;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))?;
    if print {
        println!(
            "CGI program:       {} (serve with --cgi-dir {})",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Refuses a non-empty directory that does not already hold a file set.
fn check_target(dir: &Path, force: bool) -> anyhow::Result<()> {
    let mut entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    };
    let non_empty = entries.next().is_some();
    if non_empty && !dir.join("file_set").is_dir() && !force {
        bail!(
            "{} is not empty and holds no SPECweb99 file set; give --force to write one into it anyway",
            dir.display()
        );
    }
    Ok(())
}

/// Fails early, with the figures, when the file system cannot hold the set.
fn check_space(root: &Path, dirs: u32) -> anyhow::Result<()> {
    let Ok(st) = rustix::fs::statvfs(root) else {
        return Ok(());
    };
    let free = st.f_bavail.saturating_mul(st.f_frsize);
    let existing = u64::from(dirs.min(count_dirs(root)));
    let needed = u64::from(dirs).saturating_sub(existing) * DIRECTORY_BYTES;
    if needed > free {
        bail!(
            "not enough space on {}: the file set needs about {:.0} MB more, {:.0} MB are free",
            root.display(),
            needed as f64 / 1e6,
            free as f64 / 1e6
        );
    }
    Ok(())
}

fn count_dirs(root: &Path) -> u32 {
    fs::read_dir(root).map_or(0, |d| d.filter(|e| e.is_ok()).count() as u32)
}

impl Job<'_> {
    fn work(&self) {
        let mut buf = Vec::with_capacity(1 << 20);
        while !self.stop.load(Ordering::Relaxed) {
            let dir = self.next_dir.fetch_add(1, Ordering::Relaxed);
            if dir >= self.dirs {
                return;
            }
            if let Err(e) = self.do_dir(dir, &mut buf) {
                self.stop.store(true, Ordering::Relaxed);
                if let Ok(mut first) = self.first_error.lock() {
                    first.get_or_insert(e);
                }
                return;
            }
        }
    }

    fn do_dir(&self, dir: u32, buf: &mut Vec<u8>) -> anyhow::Result<()> {
        let path = self.root.join(format!("dir{dir:05}"));
        if !self.verify_only {
            fs::create_dir_all(&path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            remove_leftovers(&path);
        }
        for id in FileId::all_in(dir) {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            self.do_file(&path.join(id.file_name()), id, buf)?;
            self.progress.inc(id.size());
        }
        let t = &self.tally;
        let done = t.written.load(Ordering::Relaxed) + t.kept.load(Ordering::Relaxed);
        self.progress.set_message(format!("{done} files"));
        Ok(())
    }

    fn do_file(&self, path: &Path, id: FileId, buf: &mut Vec<u8>) -> anyhow::Result<()> {
        match read_if_right_size(path, id.size(), buf) {
            Ok(true) if fileset::verify(id, buf).is_ok() => {
                self.tally.kept.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            Ok(true) => self.note_bad(path, "invalid", &self.tally.invalid),
            Ok(false) => self.note_bad(path, "missing or wrong size", &self.tally.missing),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
        if self.verify_only {
            return Ok(());
        }
        fileset::generate(id, self.seed, buf);
        write_atomically(path, buf)?;
        self.tally.written.fetch_add(1, Ordering::Relaxed);
        self.tally
            .written_bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn note_bad(&self, path: &Path, what: &str, counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
        if self.verify_only {
            self.progress
                .suspend(|| eprintln!("stoa: {}: {what}", path.display()));
        }
    }
}

/// Reads `path` into `buf` when it exists with exactly `size` bytes.
fn read_if_right_size(path: &Path, size: u64, buf: &mut Vec<u8>) -> io::Result<bool> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_file() && meta.len() == size => {
            buf.clear();
            io::Read::read_to_end(&mut fs::File::open(path)?, buf)?;
            Ok(buf.len() as u64 == size)
        }
        Ok(_) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Writes `data` to a temporary file beside `path`, then renames it into place. On
/// failure the temporary file is removed, and a full disk is named as such.
fn write_atomically(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    let tmp = PathBuf::from(format!("{}{TMP_SUFFIX}", path.display()));
    let result = fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(data))
        .and_then(|()| fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        if e.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error()) {
            bail!(
                "disk full while writing {}: free some space and run the command again (files written so far are kept)",
                path.display()
            );
        }
        return Err(e).with_context(|| format!("cannot write {}", path.display()));
    }
    Ok(())
}

/// Removes temporary files an interrupted run left in `dir`.
fn remove_leftovers(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().ends_with(TMP_SUFFIX) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

#[allow(
    clippy::print_stdout,
    reason = "the command's report goes to standard output"
)]
fn report(args: &FilesetArgs, job: &Job<'_>, secs: f64) -> anyhow::Result<()> {
    let t = &job.tally;
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let files = u64::from(job.dirs) * 36;
    println!("file set:          {}", job.root.display());
    println!("connections:       {}", args.connections);
    println!("directories:       {} ({} files)", job.dirs, files);
    println!("Fileset Size (MB): {:.2}", fileset::fileset_mb(job.dirs));
    if args.verify {
        let bad = load(&t.invalid) + load(&t.missing);
        println!(
            "verified:          {} valid, {} invalid, {} missing ({secs:.1} s)",
            load(&t.kept),
            load(&t.invalid),
            load(&t.missing)
        );
        if bad > 0 {
            bail!(
                "{bad} of {files} files are missing or invalid; run `stoa fileset` without --verify to repair them"
            );
        }
    } else {
        println!(
            "written:           {} files ({:.1} MB), kept {} valid files ({secs:.1} s)",
            load(&t.written),
            load(&t.written_bytes) as f64 / 1e6,
            load(&t.kept)
        );
    }
    Ok(())
}
