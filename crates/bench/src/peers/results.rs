//! A comparison's rows and what the result directory keeps of them: the round
//! schedule, `raw.csv` (one line per measurement) and `summary.txt` (medians
//! over the rounds and each server's per-round ratio to the reference).

use std::fmt::Write as _;

/// The columns of `raw.csv`, in order.
pub(crate) const RAW_COLUMNS: &str = "round,row,server,ops_per_sec,errors,server_cpu_us_per_op,\
server_kernel_pct,harness_cpu_pct,harness_bound,conform_pct,disk_sectors_read,other_cpu_pct,\
cgi_cpu_us_per_op,commit_cpu_us_per_op,warm_disk_sectors,warm_secs";

/// How the summary names an operation and scales its CPU per operation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Units {
    /// The rate's column (`ops/s`).
    pub(crate) rate: &'static str,
    /// The CPU column (`CPU µs/op`).
    pub(crate) cpu: &'static str,
    /// One operation in words (`operation`).
    pub(crate) op: &'static str,
    /// raw.csv's µs per operation times this is the CPU column's figure.
    pub(crate) scale: f64,
    /// Its decimals.
    pub(crate) decimals: usize,
}

/// A request or a web99 operation, CPU in µs.
pub(crate) const PER_OP: Units = Units {
    rate: "ops/s",
    cpu: "CPU µs/op",
    op: "operation",
    scale: 1.0,
    decimals: 2,
};

/// An IMAP command (imaptest's), CPU in ms.
pub(crate) const PER_COMMAND: Units = Units {
    rate: "cmds/s",
    cpu: "CPU ms/cmd",
    op: "command",
    scale: 1e-3,
    decimals: 3,
};

/// One measurement: one server, one row (a load or a file and mode), one round.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    /// The round, from 1.
    pub(crate) round: u32,
    /// The row's name (`1600`, `mix-1600`, `1k-keepalive`).
    pub(crate) row: String,
    /// The server's name.
    pub(crate) server: String,
    /// Operations (requests) per second.
    pub(crate) ops_per_sec: f64,
    /// Errors the load counted.
    pub(crate) errors: u64,
    /// The server's process tree's CPU (user + system, reaped children
    /// included) per operation, µs; `None` without operations.
    pub(crate) server_cpu_us_per_op: Option<f64>,
    /// The kernel's share of that CPU, %.
    pub(crate) server_kernel_pct: Option<f64>,
    /// The load generator's CPU over the run, % of one core.
    pub(crate) harness_cpu_pct: f64,
    /// Whether the load generator used more than 70 % of its cores: the
    /// result may be its limit, not the server's.
    pub(crate) harness_bound: bool,
    /// web99: the share of connections that conformed, %.
    pub(crate) conform_pct: Option<f64>,
    /// 512-byte sectors the machine's whole disks read during the run: a file
    /// set read from disk caps the figure.
    pub(crate) disk_sectors: Option<u64>,
    /// The machine's CPU busy with work other than the server's and the
    /// load's during the run, % of all CPUs.
    pub(crate) other_cpu_pct: Option<f64>,
    /// The mix row: the CGI children's CPU (the time stoa reaped) per
    /// operation of the whole mix, µs.
    pub(crate) cgi_cpu_us_per_op: Option<f64>,
    /// The mix row: the `web99-state` thread's CPU (the POSTs' durable
    /// commits) per operation of the whole mix, µs.
    pub(crate) commit_cpu_us_per_op: Option<f64>,
    /// web99: what reading the file set before the run took from the disks
    /// (sectors) and how long it took (s); `None` with `--no-warm`.
    pub(crate) warm: Option<(u64, f64)>,
}

/// The order of `n` servers in `round` (from 1): as given in odd rounds,
/// reversed in even ones, so whoever went first goes last next.
pub(crate) fn round_order(round: u32, n: usize) -> Vec<usize> {
    if round % 2 == 1 {
        (0..n).collect()
    } else {
        (0..n).rev().collect()
    }
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or(String::new(), |v| format!("{v:.decimals$}"))
}

/// `raw.csv`: [`RAW_COLUMNS`], then one line per row.
pub(crate) fn raw_csv(rows: &[Row]) -> String {
    let mut out = format!("{RAW_COLUMNS}\n");
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{:.1},{},{},{},{:.0},{},{},{},{},{},{},{},{}",
            r.round,
            r.row,
            r.server,
            r.ops_per_sec,
            r.errors,
            opt(r.server_cpu_us_per_op, 2),
            opt(r.server_kernel_pct, 1),
            r.harness_cpu_pct,
            r.harness_bound,
            opt(r.conform_pct, 1),
            r.disk_sectors.map_or(String::new(), |n| n.to_string()),
            opt(r.other_cpu_pct, 1),
            opt(r.cgi_cpu_us_per_op, 2),
            opt(r.commit_cpu_us_per_op, 2),
            r.warm.map_or(String::new(), |(n, _)| n.to_string()),
            opt(r.warm.map(|(_, s)| s), 2),
        );
    }
    out
}

/// The median of `xs` (the mean of the middle two for an even count); `None`
/// when empty.
pub(crate) fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Median, smallest and largest of `xs`, as `1.05 [1.01, 1.09]`; `-` when
/// empty.
fn spread(xs: &[f64]) -> String {
    let Some(m) = median(xs) else {
        return "-".to_owned();
    };
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{m:.2} [{lo:.2}, {hi:.2}]")
}

/// The names in `rows` in their first-seen order.
fn names(rows: &[Row], key: impl Fn(&Row) -> &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for r in rows {
        if !seen.iter().any(|s| s == key(r)) {
            seen.push(key(r).to_owned());
        }
    }
    seen
}

/// `summary.txt`: per row and server, the medians over the rounds; then each
/// other server's per-round ratio to `reference` (ops/s, CPU per operation),
/// and `stoa` to `stoa-base` when both ran.
pub(crate) fn summary(rows: &[Row], reference: &str, units: &Units) -> String {
    let (row_names, servers) = (names(rows, |r| &r.row), names(rows, |r| &r.server));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Medians over the rounds (server CPU: its process tree's user + system time per {})\n",
        units.op
    );
    let _ = writeln!(
        out,
        "{:<20} {:<10} {:>10} {:>11} {:>9} {:>8} {:>10} {:>8} {:>7} {:>6}",
        "row",
        "server",
        units.rate,
        units.cpu,
        "kernel %",
        "disk MB",
        "harness %",
        "other %",
        "errors",
        "bound"
    );
    for row in &row_names {
        for server in &servers {
            let mine: Vec<&Row> = rows
                .iter()
                .filter(|r| &r.row == row && &r.server == server)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let m = |f: &dyn Fn(&Row) -> Option<f64>| {
                median(&mine.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
            };
            let bound = mine.iter().filter(|r| r.harness_bound).count();
            let _ = writeln!(
                out,
                "{:<20} {:<10} {:>10} {:>11} {:>9} {:>8} {:>10} {:>8} {:>7} {:>6}",
                row,
                server,
                opt(m(&|r| Some(r.ops_per_sec)), 1),
                opt(
                    m(&|r| r.server_cpu_us_per_op).map(|c| c * units.scale),
                    units.decimals
                ),
                opt(m(&|r| r.server_kernel_pct), 1),
                opt(m(&|r| r.disk_sectors.map(megabytes)), 1),
                opt(m(&|r| Some(r.harness_cpu_pct)), 0),
                opt(m(&|r| r.other_cpu_pct), 1),
                mine.iter().map(|r| r.errors).sum::<u64>(),
                format!("{bound}/{}", mine.len()),
            );
            for (what, part) in [
                ("  of which CGI", m(&|r| r.cgi_cpu_us_per_op)),
                ("  of which commits", m(&|r| r.commit_cpu_us_per_op)),
            ] {
                if let Some(part) = part.map(|p| p * units.scale) {
                    let _ = writeln!(
                        out,
                        "{what:<20} {server:<10} {:>10} {part:>11.d$}",
                        "",
                        d = units.decimals
                    );
                }
            }
        }
    }
    let mut pairs: Vec<(&str, &str)> = servers
        .iter()
        .filter(|s| s.as_str() != reference)
        .map(|s| (s.as_str(), reference))
        .collect();
    let has = |name: &str| servers.iter().any(|s| s == name);
    if has("stoa") && has("stoa-base") && reference != "stoa" && reference != "stoa-base" {
        pairs.retain(|&(a, _)| a != "stoa-base");
        pairs.push(("stoa", "stoa-base"));
    }
    for (a, b) in pairs {
        ratios(&mut out, rows, &row_names, a, b, units);
    }
    let warm: Vec<(u64, f64)> = rows.iter().filter_map(|r| r.warm).collect();
    if !warm.is_empty() {
        let mb: Vec<f64> = warm.iter().map(|&(n, _)| megabytes(n)).collect();
        let secs: Vec<f64> = warm.iter().map(|&(_, s)| s).collect();
        let _ = writeln!(
            out,
            "\nThe file set read before each run (median [min, max] over {} runs):\n\
             MB from the disks {}, seconds {}.",
            warm.len(),
            spread(&mb),
            spread(&secs),
        );
    }
    out.push_str(
        "\nbound: rounds in which the load generator used more than 70 % of its cores\n\
         (the result may be its limit, not the server's).\n\
         disk MB: what the whole disks read during the run (a figure capped by the disk\n\
         shows it). other %: the machine's CPU busy with other work during the run, % of\n\
         all CPUs (above 10 % the figures are disturbed).\n",
    );
    if rows.iter().any(|r| r.cgi_cpu_us_per_op.is_some()) {
        out.push_str(
            "CGI: the CGI children's CPU (reaped by stoa); commits: the web99-state thread's\n\
             (the POSTs' durable commits); both per operation of the whole mix, within the\n\
             row's CPU.\n",
        );
    }
    out
}

/// Sectors as megabytes (10^6 bytes).
fn megabytes(sectors: u64) -> f64 {
    (sectors * super::machine::SECTOR) as f64 / 1e6
}

/// The per-round ratios `a` / `b` of each row.
fn ratios(out: &mut String, rows: &[Row], row_names: &[String], a: &str, b: &str, units: &Units) {
    let _ = writeln!(
        out,
        "\n{a} / {b}, per round: median [min, max] ({} above 1 and CPU below 1 favour {a})\n",
        units.rate
    );
    let _ = writeln!(
        out,
        "{:<20} {:>24} {:>24}",
        "row",
        units.rate,
        format!("CPU per {}", units.op)
    );
    for row in row_names {
        let of = |server: &str, round: u32| {
            rows.iter()
                .find(|r| &r.row == row && r.server == server && r.round == round)
        };
        let (mut ops, mut cpu) = (Vec::new(), Vec::new());
        for ra in rows.iter().filter(|r| &r.row == row && r.server == a) {
            let Some(rb) = of(b, ra.round) else { continue };
            if rb.ops_per_sec > 0.0 {
                ops.push(ra.ops_per_sec / rb.ops_per_sec);
            }
            if let (Some(x), Some(y)) = (ra.server_cpu_us_per_op, rb.server_cpu_us_per_op)
                && y > 0.0
            {
                cpu.push(x / y);
            }
        }
        if ops.is_empty() && cpu.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{row:<20} {:>24} {:>24}", spread(&ops), spread(&cpu));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(round: u32, server: &str, ops: f64, cpu: f64) -> Row {
        Row {
            round,
            row: "1k-keepalive".into(),
            server: server.into(),
            ops_per_sec: ops,
            errors: 0,
            server_cpu_us_per_op: Some(cpu),
            server_kernel_pct: Some(50.0),
            harness_cpu_pct: 99.0,
            harness_bound: server == "nginx" && round == 1,
            conform_pct: None,
            disk_sectors: Some(2000),
            other_cpu_pct: Some(1.0),
            cgi_cpu_us_per_op: None,
            commit_cpu_us_per_op: None,
            warm: None,
        }
    }

    #[test]
    fn rounds_alternate_who_goes_first() {
        assert_eq!(round_order(1, 3), [0, 1, 2]);
        assert_eq!(round_order(2, 3), [2, 1, 0]);
        assert_eq!(round_order(3, 2), [0, 1]);
        assert_eq!(round_order(4, 1), [0]);
    }

    #[test]
    fn medians_of_odd_even_and_empty_samples() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn raw_csv_has_a_header_and_a_line_per_measurement() {
        let mut r = row(1, "stoa", 1000.0, 12.345);
        r.server_kernel_pct = None;
        let csv = raw_csv(&[r]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], RAW_COLUMNS);
        assert_eq!(
            lines[1],
            "1,1k-keepalive,stoa,1000.0,0,12.35,,99,false,,2000,1.0,,,,"
        );
        assert_eq!(
            lines[0].split(',').count(),
            lines[1].split(',').count(),
            "every column filled or empty"
        );
    }

    #[test]
    fn the_summary_gives_medians_and_per_round_ratios() {
        let rows = [
            row(1, "nginx", 100.0, 10.0),
            row(1, "stoa", 110.0, 9.0),
            row(2, "stoa", 120.0, 8.0),
            row(2, "nginx", 100.0, 10.0),
            row(3, "nginx", 100.0, 10.0),
            row(3, "stoa", 90.0, 11.0),
        ];
        let text = summary(&rows, "nginx", &PER_OP);
        assert!(text.contains("stoa / nginx, per round"), "{text}");
        // ops: 1.1, 1.2, 0.9; CPU: 0.9, 0.8, 1.1.
        assert!(text.contains("1.10 [0.90, 1.20]"), "{text}");
        assert!(text.contains("0.90 [0.80, 1.10]"), "{text}");
        let nginx = text
            .lines()
            .find(|l| l.starts_with("1k-keepalive") && l.contains("nginx"))
            .expect("nginx's line");
        assert!(nginx.contains("100.0") && nginx.contains("1/3"), "{nginx}");
    }

    #[test]
    fn imap_rows_give_cpu_in_ms_per_command_and_stoa_over_dovecot() {
        let mut rows = Vec::new();
        for (round, stoa, dovecot) in [(1, 100.0, 400.0), (2, 150.0, 300.0), (3, 120.0, 400.0)] {
            for (server, cpu) in [("stoa", stoa), ("dovecot", dovecot)] {
                let mut r = row(round, server, 1000.0, cpu);
                r.row = "imap-c10".into();
                rows.push(r);
            }
        }
        let text = summary(&rows, "dovecot", &PER_COMMAND);
        assert!(
            text.contains("CPU ms/cmd") && text.contains("cmds/s"),
            "{text}"
        );
        let stoa = text
            .lines()
            .find(|l| l.starts_with("imap-c10") && l.contains("stoa"))
            .expect("stoa's line");
        assert!(stoa.contains(" 0.120 "), "{stoa}");
        assert!(text.contains("stoa / dovecot, per round"), "{text}");
        // CPU: 0.25, 0.5 and 0.3.
        assert!(text.contains("0.30 [0.25, 0.50]"), "{text}");
        assert!(text.contains("CPU per command"), "{text}");
    }

    #[test]
    fn a_baseline_is_compared_with_stoa() {
        let rows = [
            row(1, "nginx", 100.0, 10.0),
            row(1, "stoa-base", 100.0, 10.0),
            row(1, "stoa", 105.0, 9.5),
        ];
        let text = summary(&rows, "nginx", &PER_OP);
        assert!(text.contains("stoa / nginx"), "{text}");
        assert!(text.contains("stoa / stoa-base"), "{text}");
        assert!(!text.contains("stoa-base / nginx"), "{text}");
    }

    #[test]
    fn the_mix_rows_parts_and_the_warm_reads_have_lines_of_their_own() {
        let mut mix = row(1, "stoa", 100.0, 40.0);
        mix.row = "mix-1600".into();
        mix.cgi_cpu_us_per_op = Some(12.5);
        mix.commit_cpu_us_per_op = Some(3.25);
        mix.warm = Some((4000, 1.5));
        let text = summary(&[row(1, "nginx", 100.0, 10.0), mix], "nginx", &PER_OP);
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("mix-1600"))
            .expect("the mix row");
        assert!(lines[at + 1].starts_with("  of which CGI"), "{text}");
        assert!(lines[at + 1].ends_with("12.50"), "{text}");
        assert!(lines[at + 2].starts_with("  of which commits"), "{text}");
        assert!(
            lines[at].contains(" 1.0 "),
            "disk MB beside the CPU: {text}"
        );
        assert!(
            text.contains("MB from the disks 2.05 [2.05, 2.05]"),
            "{text}"
        );
        assert!(!summary(&[row(1, "nginx", 1.0, 1.0)], "nginx", &PER_OP).contains("of which"));
    }
}
