//! The `stoa` binary driven with curl: keep-alive, conditionals, ranges, HEAD,
//! traversal, symlinks, directories, permissions, oversized heads, methods.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{HELLO, ROOT_INDEX, SUB_INDEX, Server, ServerBuilder, Site, curl, fetch};

#[test]
fn two_urls_on_one_command_line_reuse_the_connection() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let (hello, index) = (server.url("/hello.txt"), server.url("/"));
    let run = curl(&[
        "--verbose",
        "--output",
        "/dev/null",
        "--output",
        "/dev/null",
        "--write-out",
        "%{http_code} %{num_connects}\n",
        &hello,
        &index,
    ]);
    assert_eq!(
        run.stdout, "200 1\n200 0\n",
        "second transfer should reuse the first connection; curl stderr:\n{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("Re-using existing connection"),
        "curl -v did not report connection reuse:\n{}",
        run.stderr
    );
}

#[test]
fn if_none_match_with_the_etag_gives_304() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let url = server.url("/hello.txt");
    let first = fetch(&url, &[]);
    assert_eq!(first.code, 200);
    assert_eq!(first.body, HELLO);
    let etag = first
        .header("ETag")
        .expect("200 carries an ETag")
        .to_owned();

    let header = format!("If-None-Match: {etag}");
    let cached = fetch(&url, &["--header", &header]);
    assert_eq!(cached.code, 304, "head:\n{}", cached.head);
    assert_eq!(cached.size_download, 0, "304 must have no body");
    assert_eq!(cached.header("ETag"), Some(etag.as_str()));

    let listed = format!("If-None-Match: \"nope\", {etag}");
    assert_eq!(fetch(&url, &["--header", &listed]).code, 304);
    let star = fetch(&url, &["--header", "If-None-Match: *"]);
    assert_eq!(star.code, 304);

    let other = fetch(&url, &["--header", "If-None-Match: \"something-else\""]);
    assert_eq!(other.code, 200);
    assert_eq!(other.body, HELLO);
}

#[test]
fn if_modified_since_gives_304_and_older_dates_200() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let url = server.url("/hello.txt");
    let first = fetch(&url, &[]);
    assert_eq!(first.code, 200);
    let modified = first
        .header("Last-Modified")
        .expect("200 carries Last-Modified")
        .to_owned();

    let header = format!("If-Modified-Since: {modified}");
    let cached = fetch(&url, &["--header", &header]);
    assert_eq!(cached.code, 304, "head:\n{}", cached.head);
    assert_eq!(cached.size_download, 0);

    let old = fetch(
        &url,
        &[
            "--header",
            "If-Modified-Since: Thu, 01 Jan 1970 00:00:01 GMT",
        ],
    );
    assert_eq!(old.code, 200);
    assert_eq!(old.body, HELLO);

    // If-None-Match decides when both are present (RFC 9110 §13.2.2).
    let both = fetch(
        &url,
        &["--header", &header, "--header", "If-None-Match: \"other\""],
    );
    assert_eq!(both.code, 200);
}

#[test]
fn range_gives_206_with_content_range() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let got = fetch(&server.url("/hello.txt"), &["--range", "0-4"]);
    assert_eq!(got.code, 206, "head:\n{}", got.head);
    assert_eq!(got.body, &HELLO[..5]);
    let total = HELLO.len();
    assert_eq!(
        got.header("Content-Range"),
        Some(format!("bytes 0-4/{total}").as_str())
    );
    assert_eq!(got.header("Content-Length"), Some("5"));

    let tail = fetch(&server.url("/hello.txt"), &["--range", "-3"]);
    assert_eq!(tail.code, 206);
    assert_eq!(tail.body, &HELLO[total - 3..]);
}

#[test]
fn unsatisfiable_range_gives_416() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let got = fetch(&server.url("/hello.txt"), &["--range", "999999-"]);
    assert_eq!(got.code, 416, "head:\n{}", got.head);
    assert_eq!(
        got.header("Content-Range"),
        Some(format!("bytes */{}", HELLO.len()).as_str())
    );
}

#[test]
fn head_has_content_length_and_no_body() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let got = fetch(&server.url("/hello.txt"), &["--head"]);
    assert_eq!(got.code, 200, "head:\n{}", got.head);
    let len = HELLO.len().to_string();
    assert_eq!(got.header("Content-Length"), Some(len.as_str()));
    assert_eq!(got.size_download, 0, "HEAD must not send a body");
    assert!(got.header("ETag").is_some() && got.header("Last-Modified").is_some());
}

#[test]
fn traversal_never_returns_a_file_outside_the_root() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    // The docroot is `<tmp>/docroot`: one `..` reaches secret.txt, and enough of
    // them reach /etc/passwd from any temporary directory.
    let deep = "/..".repeat(12);
    let deep_encoded = "/%2e%2e".repeat(12);
    let deep_slash = "/..".to_owned() + &"%2f..".repeat(11);
    let targets = [
        "/../../etc/passwd".to_owned(),
        "/%2e%2e/%2e%2e/etc/passwd".to_owned(),
        "/..%2f..%2fetc/passwd".to_owned(),
        format!("{deep}/etc/passwd"),
        format!("{deep_encoded}/etc/passwd"),
        format!("{deep_slash}%2fetc/passwd"),
        "/../secret.txt".to_owned(),
        "/%2e%2e/secret.txt".to_owned(),
        "/..%2fsecret.txt".to_owned(),
        "/.%2e/secret.txt".to_owned(),
        "/sub/../../secret.txt".to_owned(),
        "/sub/%2e%2e%2f%2e%2e%2fsecret.txt".to_owned(),
    ];
    for target in &targets {
        let got = fetch(&server.url(target), &["--path-as-is"]);
        assert!(
            got.code == 400 || got.code == 404,
            "{target}: expected 400 or 404, got {}",
            got.code
        );
        let body = String::from_utf8_lossy(&got.body);
        assert!(
            !body.contains("root:") && !body.contains("SECRET"),
            "{target}: leaked a file outside the root: {body:?}"
        );
    }
    // Dot-segments that stay inside the root still resolve.
    let inside = fetch(&server.url("/sub/../hello.txt"), &["--path-as-is"]);
    assert_eq!(inside.code, 200);
    assert_eq!(inside.body, HELLO);
}

#[test]
fn symlinks_leaving_the_root_are_404() {
    let site = Site::new();
    let secret = site.outside("secret.txt");
    let outside_dir = site.outside("outside");
    std::fs::create_dir(&outside_dir).expect("create outside dir");
    std::fs::write(outside_dir.join("file.txt"), b"SECRET in a dir\n").expect("write");
    let link = |target: &std::path::Path, name: &str| {
        std::os::unix::fs::symlink(target, site.root().join(name)).expect("create symlink");
    };
    link(&secret, "abs_link.txt");
    link(std::path::Path::new("../secret.txt"), "rel_link.txt");
    link(&outside_dir, "abs_dir");
    link(std::path::Path::new("../outside"), "rel_dir");
    link(std::path::Path::new("/etc/passwd"), "passwd");
    // A relative link that stays inside is served: the 404s are not because
    // symlinks are never followed.
    link(std::path::Path::new("hello.txt"), "inner_link.txt");
    link(std::path::Path::new("sub/../hello.txt"), "inner_dotdot.txt");

    let server = Server::start(site.root(), &[]);
    for target in [
        "/abs_link.txt",
        "/rel_link.txt",
        "/abs_dir/file.txt",
        "/rel_dir/file.txt",
        "/passwd",
    ] {
        let got = fetch(&server.url(target), &[]);
        assert_eq!(got.code, 404, "{target}");
        let body = String::from_utf8_lossy(&got.body);
        assert!(
            !body.contains("SECRET") && !body.contains("root:"),
            "{target}: {body:?}"
        );
    }
    for target in ["/inner_link.txt", "/inner_dotdot.txt"] {
        let got = fetch(&server.url(target), &[]);
        assert_eq!(got.code, 200, "{target}");
        assert_eq!(got.body, HELLO, "{target}");
    }
}

#[test]
fn directory_without_slash_redirects_with_location() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let got = fetch(&server.url("/sub"), &[]);
    assert_eq!(got.code, 301, "head:\n{}", got.head);
    assert_eq!(got.header("Location"), Some("/sub/"));

    let with_query = fetch(&server.url("/sub?x=1&y=2"), &[]);
    assert_eq!(with_query.code, 301);
    assert_eq!(with_query.header("Location"), Some("/sub/?x=1&y=2"));

    // Following the redirect lands on the index.
    let followed = fetch(&server.url("/sub"), &["--location"]);
    assert_eq!(followed.code, 200);
    assert_eq!(followed.body, SUB_INDEX);
}

#[test]
fn directory_with_slash_serves_index_html() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let root = fetch(&server.url("/"), &[]);
    assert_eq!(root.code, 200);
    assert_eq!(root.body, ROOT_INDEX);
    let sub = fetch(&server.url("/sub/"), &[]);
    assert_eq!(sub.code, 200);
    assert_eq!(sub.body, SUB_INDEX);
    // A directory without index.html is not listed.
    let empty = fetch(&server.url("/empty/"), &[]);
    assert_eq!(empty.code, 403);
}

#[test]
fn index_html_for_a_directory_is_served_as_text_html() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    // Named directly, the file gets its type from its extension...
    let direct = fetch(&server.url("/sub/index.html"), &[]);
    assert_eq!(direct.header("Content-Type"), Some("text/html"));
    // ...and served for its directory it must get the same type.
    for target in ["/", "/sub/"] {
        let got = fetch(&server.url(target), &[]);
        assert_eq!(got.code, 200, "{target}");
        assert_eq!(
            got.header("Content-Type"),
            Some("text/html"),
            "{target} serves index.html; head:\n{}",
            got.head
        );
    }
}

#[test]
fn unreadable_file_is_403() {
    let site = Site::new();
    let secret = site.write("private.txt", b"not for you\n");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).expect("chmod 000");
    let root_user = rustix::process::geteuid().is_root();
    let builder = if root_user {
        // Root reads anything; run the server as nobody instead. Everything it
        // must reach has to be world-readable and traversable.
        if !setpriv_available() {
            eprintln!(
                "unreadable_file_is_403: SKIPPED: running as root and `setpriv` \
                 (util-linux) is not installed, so the server cannot drop privileges"
            );
            return;
        }
        let mode = |path: &std::path::Path, bits| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(bits))
                .expect("chmod fixture");
        };
        mode(site.dir.path(), 0o755);
        mode(site.root(), 0o755);
        mode(&site.root().join("hello.txt"), 0o644);
        let mut builder = ServerBuilder::new(site.root());
        let built = std::path::Path::new(env!("CARGO_BIN_EXE_stoa"));
        if !world_executable(built) {
            // The build directory sits where nobody cannot reach (e.g. /root).
            let copy = site.outside("stoa");
            std::fs::copy(built, &copy).expect("copy the binary");
            mode(&copy, 0o755);
            builder = builder.binary(&copy);
        }
        builder.wrapper([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
    } else {
        ServerBuilder::new(site.root())
    };
    let server = builder.start();
    let denied = fetch(&server.url("/private.txt"), &[]);
    assert_eq!(denied.code, 403, "head:\n{}", denied.head);
    assert!(!String::from_utf8_lossy(&denied.body).contains("not for you"));
    let allowed = fetch(&server.url("/hello.txt"), &[]);
    assert_eq!(allowed.code, 200);
    assert_eq!(allowed.body, HELLO);
}

/// Whether any user may run `path`: it is world-executable and every directory
/// above it world-searchable.
fn world_executable(path: &std::path::Path) -> bool {
    let bits = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.permissions().mode());
    bits(path) & 0o005 == 0o005
        && path
            .ancestors()
            .skip(1)
            .filter(|p| !p.as_os_str().is_empty())
            .all(|dir| bits(dir) & 0o001 != 0)
}

fn setpriv_available() -> bool {
    std::process::Command::new("setpriv")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn oversized_heads_are_refused() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let big_header = format!("X-Big: {}", "a".repeat(9000));
    let got = fetch(&server.url("/hello.txt"), &["--header", &big_header]);
    assert_eq!(got.code, 431, "9000-byte header line; head:\n{}", got.head);

    let long_target = format!("/{}", "a".repeat(9000));
    let got = fetch(&server.url(&long_target), &[]);
    assert_eq!(got.code, 414, "9000-byte request line; head:\n{}", got.head);

    // Just under the limits is fine.
    let ok_header = format!("X-Big: {}", "a".repeat(8000));
    assert_eq!(
        fetch(&server.url("/hello.txt"), &["--header", &ok_header]).code,
        200
    );
}

#[test]
fn post_is_405_with_allow() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let got = fetch(&server.url("/hello.txt"), &["--data", "x=1"]);
    assert_eq!(got.code, 405, "head:\n{}", got.head);
    assert_eq!(got.header("Allow"), Some("GET, HEAD"));
    for method in ["PUT", "DELETE"] {
        let got = fetch(&server.url("/hello.txt"), &["--request", method]);
        assert_eq!(got.code, 405, "{method}");
        assert_eq!(got.header("Allow"), Some("GET, HEAD"), "{method}");
    }
}
