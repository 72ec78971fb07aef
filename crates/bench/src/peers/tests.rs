use clap::Parser as _;

use super::*;

/// The flags as `stoa bench peers` parses them.
#[derive(Debug, clap::Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn args(flags: &[&str]) -> Args {
    Cli::try_parse_from(std::iter::once("peers").chain(flags.iter().copied()))
        .expect("flags parse")
        .args
}

#[test]
fn loads_take_commas_or_spaces() {
    assert_eq!("1600,3200".parse(), Ok(Loads(vec![1600, 3200])));
    assert_eq!("1600 3200".parse(), Ok(Loads(vec![1600, 3200])));
    assert!("0".parse::<Loads>().is_err());
    assert!("".parse::<Loads>().is_err());
    assert!("12x".parse::<Loads>().is_err());
}

#[test]
fn run_times_are_whole_seconds() {
    assert_eq!(parse_secs("30"), Ok(Duration::from_secs(30)));
    assert_eq!(parse_secs("30s"), Ok(Duration::from_secs(30)));
    assert_eq!(parse_secs("2m"), Ok(Duration::from_secs(120)));
    assert!(parse_secs("0").is_err());
    assert!(parse_secs("1.5s").is_err());
}

#[test]
fn web99_rows_are_the_loads_then_the_mix() {
    let a = args(&[
        "--workload",
        "web99",
        "--loads",
        "100 200",
        "--mix-load",
        "50",
    ]);
    let names: Vec<String> = rows_of(&a).iter().map(RowSpec::name).collect();
    assert_eq!(names, ["100", "200", "mix-50"]);
    let mix = &rows_of(&a)[2];
    assert!(mix.wants("stoa") && mix.wants("stoa-base") && !mix.wants("nginx"));
}

/// The names of a comparison's rows, in order.
fn row_names(a: &Args) -> Vec<String> {
    rows_of(a).iter().map(RowSpec::name).collect()
}

#[test]
fn h2_rows_are_the_old_scripts() {
    assert_eq!(
        row_names(&args(&["--workload", "h2"])),
        ["h2-1k-c100-m10", "h2-10k-c100-m10", "handshake-h2"]
    );
}

#[test]
fn static_rows_are_three_files_in_two_modes() {
    assert_eq!(
        row_names(&args(&["--workload", "static"])),
        [
            "1k-keepalive",
            "1k-close",
            "10k-keepalive",
            "10k-close",
            "100k-keepalive",
            "100k-close"
        ]
    );
}

#[test]
fn servers_go_on_cpu_0_and_the_load_on_the_others() {
    let a = args(&["--workload", "static"]);
    let p = Pinning::of(&a, 4).expect("pinning");
    assert_eq!(p.server.map(|l| l.to_string()), Some("0".to_owned()));
    assert_eq!(p.harness.map(|l| l.to_string()), Some("1-3".to_owned()));
    assert_eq!(
        Pinning::of(&a, 2)
            .expect("pinning")
            .harness
            .map(|l| l.to_string()),
        Some("1".to_owned())
    );
    assert_eq!(Pinning::of(&a, 1).expect("pinning"), Pinning::default());
    let off = args(&["--workload", "static", "--no-pin"]);
    assert_eq!(Pinning::of(&off, 4).expect("pinning"), Pinning::default());
    let mine = args(&[
        "--workload",
        "static",
        "--server-cpus",
        "2",
        "--harness-cpus",
        "0,1",
    ]);
    let p = Pinning::of(&mine, 4).expect("pinning");
    assert_eq!(p.server.map(|l| l.to_string()), Some("2".to_owned()));
}

#[test]
fn a_baseline_runs_just_before_stoa() {
    let a = args(&[
        "--workload",
        "static",
        "--servers",
        "nginx,stoa",
        "--baseline",
        "/bin/true",
    ]);
    let names: Vec<&str> = peers_of(&a, Path::new("/stoa"))
        .map(|p| p.iter().map(|(n, _)| *n).collect())
        .unwrap_or_else(|_| vec!["nginx missing"]);
    // Without nginx installed the list cannot be built; the order is what
    // matters where it can.
    if names != ["nginx missing"] {
        assert_eq!(names, ["nginx", "stoa-base", "stoa"]);
    }
    let twice = args(&["--workload", "static", "--servers", "stoa,stoa"]);
    assert!(peers_of(&twice, Path::new("/stoa")).is_err());
    let base = args(&["--workload", "static", "--servers", "stoa-base"]);
    assert!(
        peers_of(&base, Path::new("/stoa")).is_err(),
        "needs --baseline"
    );
}

#[test]
fn several_connection_counts_make_a_row_each() {
    let a = args(&[
        "--workload",
        "static",
        "--connections",
        "64,256",
        "--files",
        "1k,100k",
    ]);
    let names: Vec<String> = rows_of(&a).iter().map(RowSpec::name).collect();
    assert_eq!(
        names,
        [
            "1k-keepalive-c64",
            "1k-close-c64",
            "100k-keepalive-c64",
            "100k-close-c64",
            "1k-keepalive-c256",
            "1k-close-c256",
            "100k-keepalive-c256",
            "100k-close-c256"
        ]
    );
}

#[test]
fn baseline_flags_compare_two_configurations_of_one_build() {
    let a = args(&[
        "--workload",
        "static",
        "--servers",
        "stoa",
        "--stoa-flags",
        "--workers 2 --runtime per-core",
        "--baseline-flags",
        "--workers 2 --runtime multi-thread",
    ]);
    let peers = peers_of(&a, Path::new("/stoa")).expect("two stoa configurations");
    let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
    assert_eq!(
        peers,
        [
            (
                "stoa-base",
                Software::Stoa("/stoa".into(), words("--workers 2 --runtime multi-thread"))
            ),
            (
                "stoa",
                Software::Stoa("/stoa".into(), words("--workers 2 --runtime per-core"))
            ),
        ]
    );
}

#[test]
fn imap_rows_are_the_clients_levels_against_stoa_and_dovecot_only() {
    let a = args(&["--workload", "imap", "--servers", "stoa,dovecot"]);
    assert_eq!(row_names(&a), ["imap-c10", "imap-c50"]);
    let one = args(&["--workload", "imap", "--clients", "4"]);
    assert_eq!(row_names(&one), ["imap-c4"]);
    let nginx = args(&["--workload", "imap", "--servers", "nginx,stoa"]);
    let e = peers_of(&nginx, Path::new("/stoa")).expect_err("nginx serves no IMAP");
    assert!(e.to_string().contains("stoa,dovecot"), "{e}");
    let web = args(&["--workload", "static", "--servers", "stoa,dovecot"]);
    assert!(peers_of(&web, Path::new("/stoa")).is_err());
}
