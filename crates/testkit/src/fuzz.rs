//! Replaying the committed fuzz corpus (`fuzz/corpus/<target>/` at the workspace
//! root) under plain `cargo test`, so every input the fuzzer kept is also a
//! regression test.

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

/// How many bytes of a failing input the panic message shows.
const SHOWN_BYTES: usize = 200;

/// `fuzz/corpus` of this workspace (the kit lives at `crates/testkit`).
pub fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

/// The files of `dir`, sorted; panics if there are none, so that a lost corpus
/// cannot pass silently.
pub fn corpus_files(dir: &Path) -> Vec<PathBuf> {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("readable corpus directory").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} holds no corpus files", dir.display());
    files
}

/// Runs `target` on every file of `dir`; panics naming the first file it fails
/// on. Returns how many files ran.
pub fn replay_corpus(dir: &Path, target: impl Fn(&[u8])) -> usize {
    let files = corpus_files(dir);
    for path in &files {
        let data = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // The target is not used again after a panic: only reported.
        let outcome = catch_unwind(AssertUnwindSafe(|| target(&data)));
        assert!(
            outcome.is_ok(),
            "{} failed on {}: {:?}",
            dir.display(),
            path.display(),
            String::from_utf8_lossy(&data[..data.len().min(SHOWN_BYTES)])
        );
    }
    files.len()
}

/// Runs `target` on every file of `fuzz/corpus/<name>` (see [`replay_corpus`]).
pub fn replay(name: &str, target: impl Fn(&[u8])) -> usize {
    replay_corpus(&corpus_root().join(name), target)
}
