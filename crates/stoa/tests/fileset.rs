//! `stoa fileset` against web99.md §2: directory counts, every byte of every file,
//! idempotence and repair, refusal of foreign directories, and a full disk.

use std::path::Path;
use std::process::{Command, Output};

use stoa_testkit::Tmpfs;
use stoa_web99::fileset::{self, FileId};

fn stoa(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stoa"))
        .args(args)
        .output()
        .expect("run stoa")
}

fn fileset_cmd(connections: u32, dir: &Path, extra: &[&str]) -> Output {
    let n = connections.to_string();
    let dir = dir.to_str().expect("utf-8 path");
    let mut args = vec!["fileset", "--connections", &n, "--dir", dir];
    args.extend_from_slice(extra);
    stoa(&args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Checks every file of `dirs` directories byte by byte, and that no other entry
/// exists in `file_set`.
fn assert_valid_set(root: &Path, dirs: u32) {
    let set = root.join("file_set");
    let mut names: Vec<String> = std::fs::read_dir(&set)
        .expect("file_set")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let expected: Vec<String> = (0..dirs).map(|d| format!("dir{d:05}")).collect();
    assert_eq!(names, expected);
    for dir in 0..dirs {
        let entries = std::fs::read_dir(set.join(format!("dir{dir:05}")))
            .expect("dir")
            .count();
        assert_eq!(entries, 36, "dir{dir:05}");
        for id in FileId::all_in(dir) {
            let path = set.join(id.dir_name()).join(id.file_name());
            let data = std::fs::read(&path).expect("file");
            fileset::verify(id, &data).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}

#[test]
fn ten_connections_make_31_valid_directories() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = fileset_cmd(10, tmp.path(), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("directories:       31 (1116 files)"),
        "{text}"
    );
    assert!(text.contains("Fileset Size (MB): 151.28"), "{text}");
    assert_valid_set(tmp.path(), 31);
}

#[test]
fn hundred_connections_make_90_valid_directories() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = fileset_cmd(100, tmp.path(), &["--jobs", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Fileset Size (MB): 439.20"),
        "{}",
        stdout(&out)
    );
    assert_valid_set(tmp.path(), 90);
    let verified = fileset_cmd(100, tmp.path(), &["--verify"]);
    assert!(verified.status.success(), "{}", stderr(&verified));
    assert!(
        stdout(&verified).contains("3240 valid, 0 invalid, 0 missing"),
        "{}",
        stdout(&verified)
    );
}

#[test]
fn second_run_keeps_valid_files_and_repairs_the_rest() {
    let tmp = tempfile::tempdir().expect("tempdir");
    assert!(fileset_cmd(1, tmp.path(), &[]).status.success());
    let again = fileset_cmd(1, tmp.path(), &[]);
    assert!(
        stdout(&again).contains("written:           0 files"),
        "{}",
        stdout(&again)
    );

    let dir = tmp.path().join("file_set/dir00003");
    let mut flipped = std::fs::read(dir.join("class2_4")).expect("read");
    flipped[5000] = 0;
    std::fs::write(dir.join("class2_4"), flipped).expect("corrupt");
    std::fs::remove_file(dir.join("class0_0")).expect("remove");
    std::fs::write(dir.join("class3_1"), b"short").expect("truncate");
    std::fs::write(dir.join("class1_1.tmp"), b"left over by a crash").expect("tmp");

    let verify = fileset_cmd(1, tmp.path(), &["--verify"]);
    assert!(!verify.status.success());
    let errors = stderr(&verify);
    for name in [
        "class2_4: invalid",
        "class0_0: missing",
        "class3_1: missing",
    ] {
        assert!(errors.contains(name), "{name} in {errors}");
    }
    assert!(
        stdout(&verify).contains("897 valid, 1 invalid, 2 missing"),
        "{}",
        stdout(&verify)
    );

    let repair = fileset_cmd(1, tmp.path(), &[]);
    assert!(repair.status.success(), "{}", stderr(&repair));
    assert!(
        stdout(&repair).contains("written:           3 files"),
        "{}",
        stdout(&repair)
    );
    assert!(!dir.join("class1_1.tmp").exists());
    assert_valid_set(tmp.path(), 25);
}

#[test]
fn same_seed_writes_the_same_bytes() {
    let (a, b) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    assert!(fileset_cmd(1, a.path(), &["--seed", "7"]).status.success());
    assert!(fileset_cmd(1, b.path(), &["--seed", "7"]).status.success());
    let file = "file_set/dir00010/class2_8";
    assert_eq!(
        std::fs::read(a.path().join(file)).ok(),
        std::fs::read(b.path().join(file)).ok()
    );
}

#[test]
fn foreign_directory_is_refused_without_force() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("thesis.tex"), b"precious").expect("write");
    let out = fileset_cmd(1, tmp.path(), &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is not empty and holds no SPECweb99 file set"),
        "{}",
        stderr(&out)
    );
    assert!(!tmp.path().join("file_set").exists());
    let forced = fileset_cmd(1, tmp.path(), &["--force"]);
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert_eq!(
        std::fs::read(tmp.path().join("thesis.tex")).ok(),
        Some(b"precious".to_vec())
    );
}

#[test]
fn zero_connections_is_a_usage_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = fileset_cmd(0, tmp.path(), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn full_disk_is_reported_and_leaves_no_partial_file() {
    let tmp = stoa_testkit::temp_dir();
    let Ok(fs) = Tmpfs::mount(tmp.path(), "8m") else {
        eprintln!("skipped: cannot mount a tmpfs (needs root; CI runs as root)");
        return;
    };
    let root = fs.path();
    // Too small for 25 directories: refused up front, with the figures.
    let out = fileset_cmd(1, root, &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("not enough space"),
        "{}",
        stderr(&out)
    );

    // Pretend most directories exist so the estimate passes, then run out of space
    // for real in the middle of writing.
    for d in 0..24 {
        std::fs::create_dir_all(root.join(format!("file_set/dir{d:05}"))).expect("mkdir");
    }
    let out = fileset_cmd(1, root, &["--jobs", "1"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("disk full while writing"),
        "{}",
        stderr(&out)
    );
    let mut partial = Vec::new();
    for entry in walk(&root.join("file_set")) {
        let name = entry
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(
            !name.ends_with(".tmp"),
            "temporary file left: {}",
            entry.display()
        );
        let id = parse_id(&entry);
        if fileset::verify(id, &std::fs::read(&entry).expect("read")).is_err() {
            partial.push(entry);
        }
    }
    assert!(partial.is_empty(), "half-written files: {partial:?}");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

fn parse_id(path: &Path) -> FileId {
    let dir: u32 = path
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("dir"))
        .and_then(|n| n.parse().ok())
        .expect("dir number");
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("class"))
        .expect("class file");
    let (class, num) = name.split_once('_').expect("class_num");
    FileId {
        dir,
        class: class.parse().expect("class"),
        num: num.parse().expect("num"),
    }
}
