//! What a `stoa bench web` run is asked to do: the binary's flags, parsed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use stoa_web99::workload::HttpVersion;

/// Writes (or completes) the SPECweb99 file set for `connections` under the
/// document root `www` (as `www/file_set`) and installs the CGI program in
/// `cgi`: the built-in target's content. The binary passes its `stoa fileset`.
pub type FilesetWriter = Arc<dyn Fn(u32, &Path, &Path) -> anyhow::Result<()> + Send + Sync>;

/// The phase lengths a run starts from (`--profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileName {
    /// Seconds-long phases and one iteration, for CI and the README.
    Quick,
    /// The kit's 20-minute phases and three iterations.
    Standard,
}

/// A `stoa bench web` run; each field is the flag of the same name.
#[derive(Debug, Clone)]
pub struct Options {
    /// The server, `http[s]://HOST:PORT[/root]`; `None` for the built-in one.
    pub target: Option<String>,
    /// The built-in target over HTTPS with a fresh self-signed certificate.
    pub tls: bool,
    /// Share (0–1) of new HTTPS connections that resume a TLS session.
    pub tls_resume: f64,
    /// Certificates to trust for an https target (PEM); `None`: the system's.
    pub tls_ca: Option<PathBuf>,
    /// Accept any certificate from an https target.
    pub tls_insecure: bool,
    /// Speak HTTP/2 (`--http 2`; HTTPS only): a non-compliant run.
    pub http2: bool,
    /// Simultaneous connections (load generators).
    pub connections: u32,
    /// Phase lengths.
    pub profile: ProfileName,
    /// Measurement time of each iteration, overriding the profile's.
    pub run_time: Option<Duration>,
    /// Iterations; `None`: the profile's.
    pub iterations: Option<u32>,
    /// HTTP version of the whole run.
    pub http: HttpVersion,
    /// Only static GETs.
    pub static_only: bool,
    /// No pacing, every connection kept alive (wrk's model).
    pub closed_loop: bool,
    /// Print the URLs of each connection's first deck and stop.
    pub print_urls: bool,
    /// Search the highest connection count that still conforms.
    pub find_max: bool,
    /// Highest load `find_max` may try.
    pub find_max_limit: u32,
    /// Load threads of the harness.
    pub threads: u32,
    /// `stoa bench agent` daemons (`HOST:PORT`) to run the load on.
    pub agents: Vec<String>,
    /// Processes of an external server whose CPU time the report shows.
    pub server_pid: Vec<u32>,
    /// The CPUs the harness runs on (`--harness-cpus`); `None`: any.
    pub harness_cpus: Option<crate::cpus::CpuList>,
    /// The CPUs the built-in server runs on (`--server-cpus`); `None`: any.
    pub server_cpus: Option<crate::cpus::CpuList>,
    /// Where report.txt, report.json and report.html go.
    pub out: Option<PathBuf>,
    /// The dynamic API's entry point on the server.
    pub dynamic_path: String,
    /// The SPECweb99 CGI program on the server.
    pub cgi_path: String,
    /// The `stoa` binary the built-in target runs as `stoa serve --web99`;
    /// `None`: this process's executable.
    pub server_exe: Option<PathBuf>,
    /// Where the finished run is archived, and under which label.
    pub archive: crate::archive::Keep,
}

/// `1.0` or `1.1`, as the flag and the reports spell it.
pub(crate) fn http_label(version: HttpVersion) -> &'static str {
    match version {
        HttpVersion::Http10 => "1.0",
        HttpVersion::Http11 => "1.1",
    }
}

#[cfg(test)]
impl Options {
    /// `stoa bench web` with no flags, as the binary's defaults make it.
    pub(crate) fn defaults() -> Options {
        Options {
            target: None,
            tls: false,
            tls_resume: 0.5,
            tls_ca: None,
            tls_insecure: false,
            http2: false,
            connections: 100,
            profile: ProfileName::Quick,
            run_time: None,
            iterations: None,
            http: HttpVersion::Http11,
            static_only: false,
            closed_loop: false,
            print_urls: false,
            find_max: false,
            find_max_limit: 20_000,
            threads: 1,
            agents: Vec::new(),
            server_pid: Vec::new(),
            harness_cpus: None,
            server_cpus: None,
            out: None,
            dynamic_path: "/web99".into(),
            cgi_path: "/cgi-bin/web99".into(),
            server_exe: None,
            archive: crate::archive::Keep {
                off: true,
                ..crate::archive::Keep::default()
            },
        }
    }
}
