//! The description of the system a run measured, read off this machine when the
//! run ends: hardware, kernel and the kernel settings the workloads depend on,
//! the server's processes, the harness. `stoa bench compare` prints the rows
//! that differ between two runs, so every field is a plain string.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The kernel settings that move a web or mail score (docs/results-archive.md
/// says why each one is here), read from `/proc/sys`. A missing one is left out.
pub(crate) const SYSCTLS: [&str; 30] = [
    "net.core.somaxconn",
    "net.core.netdev_max_backlog",
    "net.core.rmem_default",
    "net.core.rmem_max",
    "net.core.wmem_default",
    "net.core.wmem_max",
    "net.core.default_qdisc",
    "net.core.busy_poll",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_autocorking",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_fastopen",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_limit_output_bytes",
    "net.ipv4.tcp_max_syn_backlog",
    "net.ipv4.tcp_max_tw_buckets",
    "net.ipv4.tcp_mem",
    "net.ipv4.tcp_notsent_lowat",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_tw_reuse",
    "vm.dirty_background_ratio",
    "vm.dirty_expire_centisecs",
    "vm.dirty_ratio",
    "vm.swappiness",
    "fs.file-max",
];

/// Longest value kept of any file read here (a command line, a setting).
const MAX_VALUE: usize = 4096;

/// What ran where. Every field is what this machine said; "unknown" when it
/// could not be read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct System {
    /// The host name.
    pub hostname: String,
    /// `model name` of the first processor in `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Processors this process may run on.
    pub cores: u32,
    /// `MemTotal` in `/proc/meminfo`, in MiB.
    pub memory_mib: u64,
    /// `/proc/sys/kernel/osrelease` and `version`.
    pub kernel: String,
    /// `/proc/cmdline`.
    pub kernel_cmdline: String,
    /// `PRETTY_NAME` of `/etc/os-release`.
    pub os: String,
    /// The CPU frequency governor of cpu0, where there is one.
    pub cpu_governor: String,
    /// Transparent huge pages (`enabled`).
    pub transparent_hugepages: String,
    /// The recorded kernel settings (docs/results-archive.md lists them and
    /// why), as `/proc/sys` has them, whitespace collapsed.
    pub sysctls: BTreeMap<String, String>,
    /// The server under test.
    pub server: Server,
    /// The harness.
    pub harness: Harness,
}

/// The server under test: what it says it is and how its processes were started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Server {
    /// The report's server software (a `Server` header, a banner, a flag).
    pub software: String,
    /// Where the load went (a URL, or the SMTP and POP3 addresses).
    pub target: String,
    /// The command line of each measured process (`--server-pid`, or the
    /// built-in server), arguments joined by spaces.
    pub processes: Vec<String>,
    /// The server's configuration as the harness knows it (the built-in
    /// server's flags, or `--server-config`'s file), bounded.
    pub configuration: String,
}

/// The harness that ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Harness {
    /// `stoa-bench`'s version.
    pub version: String,
    /// This process's command line.
    pub command_line: String,
}

impl System {
    /// Reads this machine and this process's command line; `server` is what
    /// the run knows of the server under test.
    pub(crate) fn collect(server: Server) -> System {
        let sysctls = SYSCTLS
            .iter()
            .filter_map(|&name| {
                let path = format!("/proc/sys/{}", name.replace('.', "/"));
                read_value(Path::new(&path)).map(|v| (name.to_owned(), v))
            })
            .collect();
        System {
            hostname: read_value(Path::new("/proc/sys/kernel/hostname")).unwrap_or_default(),
            cpu_model: cpu_model(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default()),
            cores: crate::cpus::machine_cores() as u32,
            memory_mib: memory_mib(&std::fs::read_to_string("/proc/meminfo").unwrap_or_default()),
            kernel: [
                read_value(Path::new("/proc/sys/kernel/osrelease")),
                read_value(Path::new("/proc/sys/kernel/version")),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" "),
            kernel_cmdline: read_value(Path::new("/proc/cmdline")).unwrap_or_default(),
            os: os_name(&std::fs::read_to_string("/etc/os-release").unwrap_or_default()),
            cpu_governor: read_value(Path::new(
                "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            ))
            .unwrap_or_else(|| "none".to_owned()),
            transparent_hugepages: read_value(Path::new(
                "/sys/kernel/mm/transparent_hugepage/enabled",
            ))
            .unwrap_or_else(|| "unknown".to_owned()),
            sysctls,
            server,
            harness: Harness {
                version: env!("CARGO_PKG_VERSION").to_owned(),
                command_line: bounded(
                    std::env::args_os()
                        .map(|a| a.to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
            },
        }
    }

    /// The description as named rows, the form `compare` puts side by side:
    /// (row, value).
    pub(crate) fn rows(&self) -> Vec<(String, String)> {
        let mut rows = vec![
            ("Host".to_owned(), self.hostname.clone()),
            ("CPU".to_owned(), self.cpu_model.clone()),
            ("Cores".to_owned(), self.cores.to_string()),
            ("Memory (MiB)".to_owned(), self.memory_mib.to_string()),
            ("Kernel".to_owned(), self.kernel.clone()),
            (
                "Kernel command line".to_owned(),
                self.kernel_cmdline.clone(),
            ),
            ("OS".to_owned(), self.os.clone()),
            ("CPU governor".to_owned(), self.cpu_governor.clone()),
            (
                "Transparent huge pages".to_owned(),
                self.transparent_hugepages.clone(),
            ),
        ];
        rows.extend(self.sysctls.iter().map(|(k, v)| (k.clone(), v.clone())));
        rows.push(("Server".to_owned(), self.server.software.clone()));
        rows.push(("Target".to_owned(), self.server.target.clone()));
        for (i, p) in self.server.processes.iter().enumerate() {
            rows.push((format!("Server process {}", i + 1), p.clone()));
        }
        rows.push((
            "Server configuration".to_owned(),
            self.server.configuration.clone(),
        ));
        rows.push(("Harness".to_owned(), self.harness.version.clone()));
        rows.push((
            "Harness command line".to_owned(),
            self.harness.command_line.clone(),
        ));
        rows
    }
}

/// The command line of process `pid` (arguments joined by spaces), bounded;
/// `None` when it is gone or not ours to read.
pub(crate) fn command_line(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    (!args.is_empty()).then(|| bounded(args.join(" ")))
}

/// A small file's contents, whitespace collapsed to single spaces and cut at
/// [`MAX_VALUE`]; `None` when it cannot be read.
fn read_value(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(bounded(
        text.split_whitespace().collect::<Vec<_>>().join(" "),
    ))
}

/// `text` cut at [`MAX_VALUE`] bytes on a character boundary, marked when cut.
pub(crate) fn bounded(mut text: String) -> String {
    if text.len() > MAX_VALUE {
        let mut end = MAX_VALUE;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(" …");
    }
    text
}

fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == "model name").then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

fn memory_mib(meminfo: &str) -> u64 {
    meminfo
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix("MemTotal:")?;
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib / 1024)
}

fn os_name(os_release: &str) -> String {
    os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_proc_formats() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n";
        assert_eq!(cpu_model(cpuinfo), "Intel(R) Xeon(R) CPU @ 2.20GHz");
        assert_eq!(cpu_model(""), "unknown");
        assert_eq!(
            memory_mib("MemTotal:       24683520 kB\nMemFree: 1 kB\n"),
            24105
        );
        assert_eq!(
            os_name("NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"),
            "Debian GNU/Linux 12 (bookworm)"
        );
    }

    #[test]
    fn long_values_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_VALUE);
        let cut = bounded(long);
        assert!(cut.len() <= MAX_VALUE + " …".len());
        assert!(cut.ends_with(" …"));
        assert_eq!(bounded("short".to_owned()), "short");
    }

    #[test]
    fn this_machine_describes_itself() {
        let s = System::collect(Server::default());
        assert!(s.cores >= 1);
        assert!(s.memory_mib > 0);
        assert!(!s.kernel.is_empty());
        assert!(s.sysctls.contains_key("net.core.somaxconn"));
        assert!(s.harness.command_line.len() <= MAX_VALUE + 4);
        assert!(command_line(std::process::id()).is_some());
        let rows = s.rows();
        assert!(rows.iter().any(|(k, _)| k == "net.ipv4.tcp_rmem"));
    }
}
