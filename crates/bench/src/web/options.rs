//! What a `stoa bench web` run is asked to do: its flags, derived here and
//! flattened into the binary's command line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use stoa_web99::workload::HttpVersion;

/// Writes (or completes) the SPECweb99 file set for `connections` under the
/// document root `www` (as `www/file_set`) and installs the CGI program in
/// `cgi`: the built-in target's content. The binary passes its `stoa fileset`.
pub type FilesetWriter = Arc<dyn Fn(u32, &Path, &Path) -> anyhow::Result<()> + Send + Sync>;

/// The phase lengths a run starts from (`--profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProfileName {
    /// Seconds-long phases and one iteration, for CI and the README.
    #[value(help = None::<&str>)]
    Quick,
    /// The kit's 20-minute phases and three iterations.
    #[value(help = None::<&str>)]
    Standard,
}

/// The HTTP version of a whole run (`--http`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Http {
    /// HTTP/1.0.
    #[value(name = "1.0", help = None::<&str>)]
    Http10,
    /// HTTP/1.1, the kit's.
    #[value(name = "1.1", help = None::<&str>)]
    Http11,
    /// HTTP/2 over TLS: the same requests as streams, one at a time on each
    /// connection (a non-compliant run).
    #[value(name = "2", help = None::<&str>)]
    Http2,
}

impl Http {
    /// The version the requests are written in: HTTP/2 carries HTTP/1.1's.
    pub fn version(self) -> HttpVersion {
        match self {
            Http::Http10 => HttpVersion::Http10,
            Http::Http11 | Http::Http2 => HttpVersion::Http11,
        }
    }

    /// Whether the run speaks HTTP/2.
    pub fn is_http2(self) -> bool {
        self == Http::Http2
    }
}

/// A `stoa bench web` run; each field is the flag of the same name, and its
/// documentation the flag's help (the binary flattens these into `stoa bench web`).
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// The server, `http://HOST:PORT[/path-of-the-file_set-parent]`. Default: a
    /// built-in `stoa serve --web99` on loopback.
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,

    /// The built-in target over HTTPS (a SPECweb99_SSL-style run), with a
    /// self-signed certificate made for the run.
    #[arg(long)]
    pub tls: bool,

    /// Share (0–1) of new HTTPS connections that resume an earlier TLS session;
    /// the rest pay a full handshake. The kit's ratio is not known (web99.md
    /// §10); 0.5 keeps the full handshake (the key exchange the 2003 defect
    /// notice insists on) a large part of the load while exercising resumption.
    #[arg(long, value_name = "RATIO", default_value_t = 0.5, value_parser = crate::flags::ratio)]
    pub tls_resume: f64,

    /// Certificates to trust for an https target (PEM); default: the system's.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,

    /// Accept any certificate from an https target (handshake signatures are
    /// still checked).
    #[arg(long)]
    pub tls_insecure: bool,

    /// Simultaneous connections (load generators).
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub connections: u32,

    /// Phase lengths: `quick` (seconds) or `standard` (the kit's 20-minute phases).
    #[arg(long, value_name = "PROFILE", value_enum, default_value = "quick")]
    pub profile: ProfileName,

    /// Measurement time of each iteration, overriding the profile's (e.g. `30s`).
    #[arg(long, value_name = "DURATION", value_parser = crate::flags::duration)]
    pub run_time: Option<Duration>,

    /// Iterations (default: 3 for the standard profile, as the run rules require;
    /// 1 for quick).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub iterations: Option<u32>,

    /// HTTP version of the whole run: 1.0 or 1.1 (the kit's), or 2 (HTTPS only:
    /// the same requests and connections as HTTP/2 streams, one at a time on
    /// each connection; a non-compliant run).
    #[arg(long, value_name = "VERSION", value_enum, default_value = "1.1")]
    pub http: Http,

    /// Only static GETs, for servers without the dynamic API (the report says so).
    #[arg(long)]
    pub static_only: bool,

    /// Closed loop: no pacing and every connection kept alive (wrk's model), to
    /// cross-check throughput; conformance is meaningless in this mode.
    #[arg(long)]
    pub closed_loop: bool,

    /// Print the URLs of the first deck of each connection (one per line) and exit:
    /// the same requests for another load tool.
    #[arg(long, hide = true)]
    pub print_urls: bool,

    /// Search for the highest connection count that still conforms.
    #[arg(long)]
    pub find_max: bool,

    /// Highest load --find-max may try (the target's file set must hold it).
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub find_max_limit: u32,

    /// Load threads of the harness (each one event loop on its own core). One
    /// leaves the other cores to a server on the same machine.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: u32,

    /// Run the load on these `stoa bench agent` daemons (`HOST:PORT,…`) instead of
    /// in this process; the connections are split evenly between them and their
    /// counters merged. This process validates, resets and reports.
    #[arg(long, value_name = "ADDR,…", value_delimiter = ',')]
    pub agents: Vec<String>,

    /// Processes of the server under test whose CPU time the report puts beside
    /// the harness's (repeat for several, e.g. nginx's master and worker; the
    /// built-in server is measured without it). Same machine only.
    #[arg(long, value_name = "PID")]
    pub server_pid: Vec<u32>,

    /// Run the harness on these CPUs only (a `taskset -c` list: `1`, `2-3`,
    /// `0,2`); the report then judges its CPU share against them and calls a
    /// trial where it passed 70 % harness-bound.
    #[arg(long, value_name = "LIST")]
    pub harness_cpus: Option<crate::cpus::CpuList>,

    /// Run the built-in server on these CPUs only (a `taskset -c` list); pin an
    /// external server with `taskset -c LIST` when starting it.
    #[arg(long, value_name = "LIST", conflicts_with = "target")]
    pub server_cpus: Option<crate::cpus::CpuList>,

    /// Write report.txt, report.json and report.html here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Where the finished run is archived, and under which label.
    #[command(flatten)]
    pub archive: crate::archive::Keep,

    /// The dynamic API's entry point on the server.
    #[arg(long, value_name = "PATH", default_value = "/web99")]
    pub dynamic_path: String,

    /// The SPECweb99 CGI program on the server.
    #[arg(long, value_name = "PATH", default_value = "/cgi-bin/web99")]
    pub cgi_path: String,

    /// The `stoa` binary the built-in target runs as `stoa serve --web99`;
    /// `None`: this process's executable. Not a flag.
    #[arg(skip)]
    pub server_exe: Option<PathBuf>,
}

/// `1.0` or `1.1`, as the flag and the reports spell the version of the
/// requests (an HTTP/2 run's are 1.1's).
pub(crate) fn http_label(http: Http) -> &'static str {
    match http.version() {
        HttpVersion::Http10 => "1.0",
        HttpVersion::Http11 => "1.1",
    }
}

#[cfg(test)]
impl Options {
    /// `stoa bench web` with no flags but `--no-archive`: the flags' defaults.
    pub(crate) fn defaults() -> Options {
        use clap::{Args as _, FromArgMatches as _};
        let command = Options::augment_args(clap::Command::new("web"));
        let matches = command.get_matches_from(["web", "--no-archive"]);
        Options::from_arg_matches(&matches).expect("invariant: the defaults parse")
    }
}
