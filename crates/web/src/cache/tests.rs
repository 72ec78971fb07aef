use std::os::unix::fs::symlink;
use std::time::Duration;

use super::*;

struct Root {
    dir: tempfile::TempDir,
    fd: OwnedFd,
}

fn root() -> Root {
    let dir = tempfile::tempdir().expect("tempdir");
    let docroot = dir.path().join("www");
    std::fs::create_dir_all(docroot.join("sub/empty")).expect("mkdir");
    std::fs::write(docroot.join("index.html"), b"<h1>home</h1>").expect("write");
    std::fs::write(docroot.join("sub/index.html"), b"sub index").expect("write");
    std::fs::write(docroot.join("a.txt"), b"hello").expect("write");
    std::fs::write(docroot.join("big.bin"), vec![7u8; 100_000]).expect("write");
    std::fs::write(dir.path().join("secret"), b"outside").expect("write");
    symlink("../secret", docroot.join("escape")).expect("symlink");
    symlink("/etc/passwd", docroot.join("abs")).expect("symlink");
    symlink("a.txt", docroot.join("inside")).expect("symlink");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        docroot.join("fifo"),
        FileType::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
    let fd = rustix::fs::open(&docroot, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
        .expect("open root");
    Root { dir, fd }
}

fn cache(revalidate: Duration) -> FileCache {
    FileCache::new(CacheConfig {
        revalidate,
        ..CacheConfig::default()
    })
}

fn kind_name(kind: &Kind) -> String {
    match kind {
        Kind::File(f) => format!(
            "file {} bytes, in memory: {}",
            f.len,
            matches!(f.contents, Contents::Memory(_))
        ),
        Kind::Directory => "directory".into(),
        Kind::NotFound => "not found".into(),
        Kind::Forbidden | Kind::NoIndex => "forbidden".into(),
        Kind::Unavailable => "unavailable".into(),
    }
}

#[test]
fn resolution() {
    let r = root();
    let mut c = cache(Duration::from_secs(1));
    let now = Instant::now();
    let cases = [
        ("/", "file 13 bytes, in memory: true"),
        ("/a.txt", "file 5 bytes, in memory: true"),
        ("/big.bin", "file 100000 bytes, in memory: false"),
        ("/inside", "file 5 bytes, in memory: true"),
        ("/sub", "directory"),
        ("/sub/", "file 9 bytes, in memory: true"),
        ("/sub/empty/", "forbidden"),
        ("/missing", "not found"),
        ("/missing/", "not found"),
        ("/a.txt/", "not found"),
        ("/escape", "not found"),
        ("/abs", "not found"),
        ("/fifo", "forbidden"),
    ];
    for (path, want) in cases {
        let got = kind_name(&c.lookup(0, &r.fd, path.as_bytes(), now).kind);
        assert_eq!(got, want, "{path}");
    }
    drop(r.dir);
}

#[test]
fn headers_and_tags() {
    let r = root();
    let mut c = cache(Duration::from_secs(1));
    let Kind::File(f) = &c.lookup(0, &r.fd, b"/a.txt", Instant::now()).kind else {
        panic!("file expected");
    };
    let lines = String::from_utf8(f.header_lines.to_vec()).expect("ascii");
    assert!(
        lines.starts_with("Content-Type: text/plain\r\nLast-Modified: "),
        "{lines}"
    );
    assert!(
        lines.contains(&format!("ETag: \"{:x}-5\"\r\n", f.mtime)),
        "{lines}"
    );
    assert!(lines.ends_with("Accept-Ranges: bytes\r\n"), "{lines}");
    assert_eq!(content_type(b"/x/y.html"), "text/html");
    let Kind::File(index) = &c.lookup(0, &r.fd, b"/sub/", Instant::now()).kind else {
        panic!("index expected");
    };
    assert!(
        index
            .header_lines
            .starts_with(b"Content-Type: text/html\r\n")
    );
    assert_eq!(
        content_type(b"/file_set/dir00001/class1_2"),
        "application/octet-stream"
    );
    assert_eq!(content_type(b"/.hidden"), "application/octet-stream");
}

#[test]
fn changes_are_seen_after_revalidation() {
    let r = root();
    let path = r.dir.path().join("www/a.txt");
    let mut c = cache(Duration::ZERO);
    let t0 = Instant::now();
    let first = match &c.lookup(0, &r.fd, b"/a.txt", t0).kind {
        Kind::File(f) => in_memory(f),
        _ => None,
    };
    assert_eq!(first.as_deref(), Some(&b"hello"[..]));
    // Replace the file (new inode), as a deploy would.
    let tmp = r.dir.path().join("www/a.txt.new");
    std::fs::write(&tmp, b"hello, world").expect("write");
    std::fs::rename(&tmp, &path).expect("rename");
    let second = match &c.lookup(0, &r.fd, b"/a.txt", t0).kind {
        Kind::File(f) => in_memory(f),
        _ => None,
    };
    assert_eq!(second.as_deref(), Some(&b"hello, world"[..]));
    std::fs::remove_file(&path).expect("rm");
    assert_eq!(
        kind_name(&c.lookup(0, &r.fd, b"/a.txt", t0).kind),
        "not found"
    );
}

fn in_memory(f: &FileInfo) -> Option<Bytes> {
    match &f.contents {
        Contents::Memory(bytes) => Some(bytes.clone()),
        Contents::Open(_) => None,
    }
}

fn cached_file(c: &mut FileCache, r: &Root, path: &[u8]) -> Option<Contents> {
    match &c.lookup(0, &r.fd, path, Instant::now()).kind {
        Kind::File(f) => Some(f.contents.clone()),
        _ => None,
    }
}

#[test]
fn an_unchanged_file_keeps_its_descriptor_or_contents_on_revalidation() {
    let r = root();
    let mut c = cache(Duration::ZERO);
    for path in [&b"/a.txt"[..], b"/inside", b"/sub/", b"/big.bin"] {
        let first = cached_file(&mut c, &r, path).expect("a file");
        let again = cached_file(&mut c, &r, path).expect("still a file");
        let same = match (first, again) {
            (Contents::Open(a), Contents::Open(b)) => Arc::ptr_eq(&a, &b),
            (Contents::Memory(a), Contents::Memory(b)) => a.as_ptr() == b.as_ptr(),
            _ => false,
        };
        assert!(same, "{path:?} was opened again");
    }
}

#[test]
fn only_files_sent_with_sendfile_keep_a_descriptor() {
    let r = root();
    let mut c = cache(Duration::from_secs(1));
    let now = Instant::now();
    for path in [&b"/a.txt"[..], b"/", b"/big.bin", b"/missing"] {
        c.lookup(0, &r.fd, path, now);
    }
    assert!(matches!(
        cached_file(&mut c, &r, b"/big.bin"),
        Some(Contents::Open(_))
    ));
    assert!(matches!(
        cached_file(&mut c, &r, b"/a.txt"),
        Some(Contents::Memory(_))
    ));
    assert_eq!(c.descriptors, 1);
}

#[test]
fn bounded_by_descriptors_without_losing_files_kept_in_memory() {
    let r = root();
    for i in 0..10 {
        std::fs::write(r.dir.path().join(format!("www/big{i}")), vec![b'x'; 40_000])
            .expect("write");
        std::fs::write(r.dir.path().join(format!("www/small{i}")), b"x").expect("write");
    }
    let mut c = FileCache::new(CacheConfig {
        max_open_files: 3,
        ..CacheConfig::default()
    });
    let now = Instant::now();
    for i in 0..10 {
        c.lookup(0, &r.fd, format!("/small{i}").as_bytes(), now);
    }
    for i in 0..10 {
        c.lookup(0, &r.fd, format!("/big{i}").as_bytes(), now);
        assert!(c.descriptors <= 3);
    }
    let holders = c
        .entries
        .iter()
        .filter(|(_, e)| e.holds_descriptor())
        .count();
    assert_eq!((holders, c.descriptors), (3, 3));
    // The three most recent large files are the ones kept, and every small
    // file (older than all of them) is still there.
    for i in 0..10 {
        assert!(c.entries.contains(format!("/small{i}").as_bytes()));
        let big = c.entries.contains(format!("/big{i}").as_bytes());
        assert_eq!(big, i >= 7, "big{i}");
    }
}

#[test]
fn a_flood_of_long_missing_paths_is_bounded_in_bytes() {
    let r = root();
    let budget = 20_000;
    let mut c = FileCache::new(CacheConfig {
        memory_budget: budget,
        ..CacheConfig::default()
    });
    let now = Instant::now();
    for i in 0..1_000 {
        let path = format!("/{i:0>1000}");
        c.lookup(0, &r.fd, path.as_bytes(), now);
        assert!(c.memory <= budget, "{}", c.memory);
    }
    assert!(c.entries.len() < 20, "{} entries", c.entries.len());
}

#[test]
fn a_file_turned_into_a_link_out_of_the_root_is_not_served() {
    let r = root();
    let mut c = cache(Duration::ZERO);
    let path = r.dir.path().join("www/a.txt");
    assert!(cached_file(&mut c, &r, b"/a.txt").is_some());
    std::fs::remove_file(&path).expect("rm");
    symlink("../secret", &path).expect("symlink");
    assert_eq!(
        kind_name(&c.lookup(0, &r.fd, b"/a.txt", Instant::now()).kind),
        "not found"
    );
}

#[test]
fn trusted_within_the_revalidation_interval() {
    let r = root();
    let mut c = cache(Duration::from_secs(3600));
    let t0 = Instant::now();
    assert_eq!(
        kind_name(&c.lookup(0, &r.fd, b"/a.txt", t0).kind),
        "file 5 bytes, in memory: true"
    );
    std::fs::remove_file(r.dir.path().join("www/a.txt")).expect("rm");
    let just_before = t0 + Duration::from_secs(3600) - Duration::from_nanos(1);
    assert_eq!(
        kind_name(&c.lookup(0, &r.fd, b"/a.txt", just_before).kind),
        "file 5 bytes, in memory: true"
    );
    // Checked again once the interval is over, to the nanosecond.
    let at_the_end = t0 + Duration::from_secs(3600);
    assert_eq!(
        kind_name(&c.lookup(0, &r.fd, b"/a.txt", at_the_end).kind),
        "not found"
    );
}

#[test]
fn an_interval_too_long_for_the_clock_never_ends() {
    let r = root();
    let mut c = cache(Duration::MAX);
    let t0 = Instant::now();
    assert_eq!(
        kind_name(&c.lookup(0, &r.fd, b"/a.txt", t0).kind),
        "file 5 bytes, in memory: true"
    );
    std::fs::remove_file(r.dir.path().join("www/a.txt")).expect("rm");
    let later = t0 + Duration::from_secs(86_400 * 365);
    assert_eq!(
        kind_name(&c.lookup(0, &r.fd, b"/a.txt", later).kind),
        "file 5 bytes, in memory: true"
    );
}

#[test]
fn bounded_by_entries_and_memory() {
    let r = root();
    for i in 0..20 {
        std::fs::write(r.dir.path().join(format!("www/f{i}")), vec![b'x'; 1000]).expect("write");
    }
    let mut c = FileCache::new(CacheConfig {
        max_entries: 5,
        memory_budget: 3500,
        ..CacheConfig::default()
    });
    let now = Instant::now();
    for i in 0..20 {
        c.lookup(0, &r.fd, format!("/f{i}").as_bytes(), now);
        assert!(c.entries.len() <= 5);
        assert!(c.memory <= 3500, "{}", c.memory);
    }
    let in_memory: usize = c.entries.iter().map(|(k, e)| e.memory(k.len())).sum();
    assert_eq!(in_memory, c.memory);
}

#[test]
fn sites_share_one_bound() {
    let (a, b) = (root(), root());
    std::fs::write(b.dir.path().join("www/a.txt"), b"site b's a.txt").expect("write");
    for i in 0..20 {
        std::fs::write(a.dir.path().join(format!("www/f{i}")), vec![b'x'; 1000]).expect("write");
        std::fs::write(b.dir.path().join(format!("www/f{i}")), vec![b'x'; 1000]).expect("write");
    }
    let mut c = FileCache::new(CacheConfig {
        max_entries: 6,
        memory_budget: 4500,
        ..CacheConfig::default()
    });
    let now = Instant::now();
    // The same path in two sites is two entries, each from its own root.
    let len = |c: &mut FileCache, site: usize, r: &Root| match &c
        .lookup(site, &r.fd, b"/a.txt", now)
        .kind
    {
        Kind::File(f) => f.len,
        other => panic!("{other:?}"),
    };
    assert_eq!(len(&mut c, 0, &a), 5);
    assert_eq!(len(&mut c, 3, &b), 14);
    assert_eq!(len(&mut c, 0, &a), 5);
    assert_eq!(c.entries.len(), 2);
    // Every site's entries count against the one bound.
    for i in 0..20 {
        let (site, r) = if i % 2 == 0 { (0, &a) } else { (1, &b) };
        c.lookup(site, &r.fd, format!("/f{i}").as_bytes(), now);
        assert!(c.entries.len() <= 6);
        assert!(c.memory <= 4500, "{}", c.memory);
    }
    let in_memory: usize = c.entries.iter().map(|(k, e)| e.memory(k.len())).sum();
    assert_eq!(in_memory, c.memory);
}

#[test]
fn unreadable_file_is_forbidden() {
    use std::os::unix::fs::PermissionsExt;
    let r = root();
    let path = r.dir.path().join("www/a.txt");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    let mut c = cache(Duration::from_secs(1));
    let got = kind_name(&c.lookup(0, &r.fd, b"/a.txt", Instant::now()).kind);
    if rustix::process::geteuid().is_root() {
        // Root reads anything (CAP_DAC_OVERRIDE); the end-to-end test runs the
        // server as an unprivileged user to cover this case.
        assert_eq!(got, "file 5 bytes, in memory: true");
    } else {
        assert_eq!(got, "forbidden");
    }
}

#[test]
fn fallback_without_openat2_follows_no_symlinks() {
    let r = root();
    let open = |p: &[u8]| {
        open_without_symlinks(&r.fd, p).map(|fd| rustix::fs::fstat(&fd).expect("fstat").st_size)
    };
    assert_eq!(open(b"a.txt"), Ok(5));
    assert_eq!(open(b"sub/index.html"), Ok(9));
    assert!(open(b"sub").is_ok());
    assert!(open(b"").is_ok());
    assert_eq!(open(b"inside"), Err(Errno::LOOP));
    assert_eq!(open(b"escape"), Err(Errno::LOOP));
    assert_eq!(open(b"abs"), Err(Errno::LOOP));
    assert_eq!(open(b"missing/x"), Err(Errno::NOENT));
    assert_eq!(open(b"a.txt/x"), Err(Errno::NOTDIR));
}
