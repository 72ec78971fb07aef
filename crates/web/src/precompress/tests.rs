//! `stoa compress`'s tests: siblings written and skipped, and the attacks on a
//! tree others can write (issue 56).

use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;

use super::{Options, compress_tree, open_source};

#[test]
fn siblings_round_trip_keep_permissions_and_skip_what_they_should() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "body { color: #333; margin: 0 auto; }\n".repeat(500);
    let css = dir.path().join("site.css");
    fs::write(&css, &text).expect("write css");
    fs::set_permissions(&css, fs::Permissions::from_mode(0o640)).expect("chmod");
    fs::create_dir(dir.path().join("sub")).expect("mkdir");
    fs::write(dir.path().join("sub/index.html"), text.replace("body", "p")).expect("html");
    fs::write(dir.path().join("tiny.txt"), "hi").expect("tiny");
    fs::write(dir.path().join("photo.jpg"), vec![7u8; 4096]).expect("jpg");
    // Random bytes (xorshift64*): no coding makes them smaller.
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let noise: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect();
    fs::write(dir.path().join("noise.txt"), &noise).expect("noise");
    // A sibling older than its file: stale.
    let stale = dir.path().join("noise.txt.gz");
    fs::write(&stale, b"stale").expect("stale");
    fs::File::options()
        .write(true)
        .open(&stale)
        .and_then(|f| f.set_modified(std::time::SystemTime::UNIX_EPOCH))
        .expect("age the stale sibling");
    std::os::unix::fs::symlink(&css, dir.path().join("link.css")).expect("symlink");

    let summary = compress_tree(dir.path(), &Options::default()).expect("compress");
    assert!(summary.failed.is_empty(), "{:?}", summary.failed);
    assert_eq!(summary.files, 3, "site.css, sub/index.html, noise.txt");
    assert_eq!(summary.written, 6);
    assert_eq!(summary.no_gain, 3);
    assert!(
        !dir.path().join("noise.txt.gz").exists(),
        "the stale sibling is gone"
    );
    assert!(!dir.path().join("tiny.txt.gz").exists());
    assert!(!dir.path().join("photo.jpg.gz").exists());
    assert!(!dir.path().join("link.css.gz").exists());
    assert!(!dir.path().join("site.css.gz.gz").exists());

    let mut back = String::new();
    flate2::read::GzDecoder::new(fs::File::open(dir.path().join("site.css.gz")).expect("gz"))
        .read_to_string(&mut back)
        .expect("gunzip");
    assert_eq!(back, text);
    let br = fs::read(dir.path().join("site.css.br")).expect("br");
    let mut back = Vec::new();
    brotli::BrotliDecompress(&mut &br[..], &mut back).expect("unbrotli");
    assert_eq!(back, text.as_bytes());
    let zs = fs::read(dir.path().join("site.css.zst")).expect("zst");
    assert_eq!(
        zstd::stream::decode_all(&zs[..]).expect("unzstd"),
        text.as_bytes()
    );
    let mode = fs::metadata(dir.path().join("site.css.br"))
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);
    let leftovers = fs::read_dir(dir.path())
        .expect("ls")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".stoa-compress-")
        })
        .count();
    assert_eq!(leftovers, 0);

    let again = compress_tree(dir.path(), &Options::default()).expect("again");
    assert_eq!(again.written, 0);
    assert_eq!(again.up_to_date, 6);
}

/// What a file outside the tree holds; no compression may reach it.
const PRECIOUS: &[u8] = b"root's own file, not to be touched\n";

#[test]
fn symlinks_planted_at_temporary_and_sibling_names_are_not_written_through() {
    // Issue 56 (3): the temporary file was `.stoa-compress-<pid>-<sibling>`,
    // created with File::create (following links, no O_EXCL) and then given the
    // source's mode, so a user who can write the tree and guess the pid made
    // root truncate, overwrite and chmod any file. Both names get a link to a
    // file outside the tree; it must keep its bytes and its mode.
    let outside = tempfile::tempdir().expect("tempdir");
    let victim = outside.path().join("victim");
    fs::write(&victim, PRECIOUS).expect("write victim");
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o600)).expect("chmod");
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "p { margin: 0 auto; padding: 1em; }\n".repeat(500);
    let css = dir.path().join("site.css");
    fs::write(&css, &text).expect("write css");
    fs::set_permissions(&css, fs::Permissions::from_mode(0o644)).expect("chmod");
    for ext in [".gz", ".br", ".zst"] {
        let old_temporary = format!(".stoa-compress-{}-site.css{ext}", std::process::id());
        std::os::unix::fs::symlink(&victim, dir.path().join(old_temporary)).expect("plant");
    }
    std::os::unix::fs::symlink(&victim, dir.path().join("site.css.gz")).expect("plant");

    let summary = compress_tree(dir.path(), &Options::default()).expect("compress");

    assert_eq!(fs::read(&victim).expect("read victim"), PRECIOUS);
    let mode = fs::symlink_metadata(&victim)
        .expect("victim")
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o600, "the file outside was chmodded");
    assert!(summary.failed.is_empty(), "{:?}", summary.failed);
    assert_eq!(summary.written, 3);
    for ext in [".gz", ".br", ".zst"] {
        let sibling = dir.path().join(format!("site.css{ext}"));
        let meta = fs::symlink_metadata(&sibling).expect("sibling");
        assert!(
            meta.is_file(),
            "{ext}: the sibling is a regular file, not the link"
        );
        assert_eq!(meta.permissions().mode() & 0o7777, 0o644);
    }
}

#[test]
fn a_file_swapped_for_a_link_after_it_was_listed_is_not_read() {
    // Issue 56 (4): the walk took a file's type from the directory listing (a
    // link's own), then metadata() and open() followed the name, so a file
    // swapped for a link to a root-only file in between was compressed into
    // the tree, readable by whoever planted the link. What is read is now
    // decided on the opened descriptor: the source is opened O_NOFOLLOW
    // relative to its directory, and only a regular file is taken. This
    // calls that decision directly with what the swap leaves behind.
    let outside = tempfile::tempdir().expect("tempdir");
    let secret = outside.path().join("shadow.html");
    fs::write(&secret, PRECIOUS).expect("write secret");
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).expect("chmod");
    let dir = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(&secret, dir.path().join("page.html")).expect("symlink");
    let text = "<p>hello</p>\n".repeat(100);
    fs::write(dir.path().join("real.html"), &text).expect("write");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        dir.path().join("pipe.html"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
    let fd = rustix::fs::open(
        dir.path(),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .expect("open the directory");

    let link = open_source(fd.as_fd(), OsStr::new("page.html"));
    assert!(link.is_err(), "a link was opened as the source");
    // A FIFO swapped in neither blocks the open nor is read.
    assert!(open_source(fd.as_fd(), OsStr::new("pipe.html")).is_err());
    let (mut file, st) = open_source(fd.as_fd(), OsStr::new("real.html")).expect("a regular file");
    assert_eq!(st.st_size as usize, text.len());
    let mut read = String::new();
    file.read_to_string(&mut read).expect("read");
    assert_eq!(read, text);
}
