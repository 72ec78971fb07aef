//! Replays the committed fuzz corpus (`fuzz/corpus/pop3_*`) through the fuzz targets,
//! so every input the fuzzer kept is also a regression test under plain `cargo test`.

use std::fs;
use std::path::{Path, PathBuf};

use stoa_pop3_proto::fuzzing;

/// The files of `fuzz/corpus/<target>`, sorted; fails if there are none, so that a
/// lost corpus cannot pass silently.
fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let entries = fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("readable corpus directory").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} holds no corpus files", dir.display());
    files
}

/// Runs `target` on every file of `fuzz/corpus/<name>`, naming the file that fails.
fn replay(name: &str, target: fn(&[u8])) -> usize {
    let files = corpus(name);
    for path in &files {
        let data = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let outcome = std::panic::catch_unwind(|| target(&data));
        assert!(
            outcome.is_ok(),
            "{} failed on {}: {:?}",
            name,
            path.display(),
            String::from_utf8_lossy(&data[..data.len().min(200)])
        );
    }
    files.len()
}

#[test]
fn session_corpus() {
    assert!(replay("pop3_session", fuzzing::session) > 0);
}

#[test]
fn encoder_corpus() {
    assert!(replay("pop3_encoder", fuzzing::encoder) > 0);
}

#[test]
fn command_corpus() {
    assert!(replay("pop3_command", fuzzing::command) > 0);
}
