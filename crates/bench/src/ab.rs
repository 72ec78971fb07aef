//! `stoa bench ab`: two configurations measured in interleaved rounds until
//! the difference is clear, or clearly too small to matter, or the budget is
//! spent.
//!
//! Each round measures A and B once, in alternating order (A B, B A, …) or in
//! a random order per round (`--order random`), so a drift of the machine
//! (a warming cache, a neighbour's load) falls on both. A measurement is one
//! `stoa bench web` or `stoa bench mail` run of this binary, its figure read
//! from the run's JSON: the score (conforming connections, or established
//! msgs/min), the throughput, or the server's CPU per operation at a fixed
//! load (much cheaper per round than a search for the score).
//!
//! The judgement is a sequential test that stays honest about peeking: the
//! data are looked at only at rounds 3, 6, 12, 24, … (and at the last one),
//! and the 5 % error is shared equally among those looks (Bonferroni), so
//! "B is better" is claimed wrongly in at most 5 % of runs of A against
//! itself. It stops:
//!
//! - when the interval of the difference leaves out zero: "B is X % (± Y %)
//!   better / worse";
//! - when the interval includes zero and its half-width is within
//!   `--precision`: "no difference detected at this precision";
//! - at `--max-rounds`: no verdict, and how many rounds would detect 2 % at
//!   the spread seen.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

use crate::archive::{Figures, Keep, Kind};
use crate::stats::{CONFIDENCE, Difference, Sample, larger_cv, runs_to_detect};

/// The difference the "rounds needed" line is about.
const DETECT: f64 = 0.02;
/// The first look; fewer runs than this say nothing about the spread.
const FIRST_LOOK: u32 = 3;
/// Most rounds any comparison may take.
pub const MAX_ROUNDS: u32 = 200;

/// The figure each run yields (`--metric`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Metric {
    /// The server's CPU per operation (web) or per session (mail) at the fixed
    /// load; lower is better.
    #[value(name = "cpu", help = None::<&str>)]
    CpuPerOp,
    /// Operations/s (web) or sessions/s (mail) at the fixed load.
    #[value(help = None::<&str>)]
    Throughput,
    /// Conforming connections (web, `--find-max` from the side's last
    /// result) or established msgs/min (mail, `--find-max`).
    #[value(help = None::<&str>)]
    Score,
}

impl Metric {
    fn higher_is_better(self) -> bool {
        !matches!(self, Metric::CpuPerOp)
    }

    fn name(self, kind: Kind) -> &'static str {
        let units = kind.units();
        match self {
            Metric::Score => units.score,
            Metric::Throughput => units.throughput,
            Metric::CpuPerOp => units.server_cpu,
        }
    }

    fn pick(self, f: &Figures) -> Option<f64> {
        match self {
            Metric::Score => f.score,
            Metric::Throughput => f.throughput,
            Metric::CpuPerOp => f.server_cpu,
        }
    }
}

/// The order of A and B within each round (`--order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    /// A B, then B A, then A B …
    #[value(help = None::<&str>)]
    Alternate,
    /// A random order each round (`--seed`).
    #[value(help = None::<&str>)]
    Random,
}

/// One configuration.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// Its name in the output and in the archive (`--a-label`).
    pub label: String,
    /// Flags that make the harness measure it: `--target URL` for web,
    /// `--smtp A --pop3 B` for mail (`--a-target`).
    pub harness_args: Vec<String>,
    /// A shell command run before each of its measurements (`--a-setup`):
    /// a sysctl, a server restart with other flags.
    pub setup: Option<String>,
}

/// A `stoa bench ab` comparison; each field is the flag of the same name.
#[derive(Debug, Clone)]
pub struct Options {
    /// Which harness measures (`--mail` for the mail one).
    pub kind: Kind,
    /// The first configuration, the base of the relative difference.
    pub a: Side,
    /// The second.
    pub b: Side,
    /// The figure compared.
    pub metric: Metric,
    /// Stop as "no difference" once the interval's half-width is at most this
    /// share of A's mean (0.01 for 1 %).
    pub precision: f64,
    /// The round budget.
    pub max_rounds: u32,
    /// The order within rounds.
    pub order: Order,
    /// The random order's seed.
    pub seed: u64,
    /// Flags for every measurement of both sides (`-- …`), e.g.
    /// `--connections 400 --run-time 60s`.
    pub harness_args: Vec<String>,
    /// Where each run is archived (under its side's label).
    pub archive: Keep,
    /// The `stoa` binary to run; `None`: this process's executable.
    pub exe: Option<PathBuf>,
}

/// The outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Verdict {
    /// B differs from A: relative difference and half-width (shares of A's
    /// mean), and whether that is an improvement.
    Differs { rel: f64, half: f64, better: bool },
    /// The interval includes zero and is within the precision.
    NoDifference { half: f64 },
    /// The budget ran out: the half-width reached, and the rounds that would
    /// detect [`DETECT`] at the spread seen.
    Undecided {
        half: Option<f64>,
        needed: Option<u64>,
    },
}

/// The looks of a budget of `max_rounds`: 3, 6, 12, … below it, and it.
pub(crate) fn looks(max_rounds: u32) -> Vec<u32> {
    let mut v = Vec::new();
    let mut k = FIRST_LOOK;
    while k < max_rounds {
        v.push(k);
        k = k.saturating_mul(2);
    }
    v.push(max_rounds.max(2));
    v
}

/// The sequential judgement after `a.len()` (= `b.len()`) rounds; `None`:
/// go on.
pub(crate) fn judge(
    a: &[f64],
    b: &[f64],
    max_rounds: u32,
    precision: f64,
    higher_is_better: bool,
) -> Option<Verdict> {
    let round = a.len().min(b.len()) as u32;
    let plan = looks(max_rounds);
    let last = round >= max_rounds;
    if !plan.contains(&round) && !last {
        return None;
    }
    let confidence = 1.0 - (1.0 - CONFIDENCE) / plan.len() as f64;
    let (sa, sb) = (Sample::of(a), Sample::of(b));
    let d = sa
        .zip(sb)
        .and_then(|(sa, sb)| Difference::welch_at(&sa, &sb, confidence));
    let rel = d.and_then(|d| d.relative());
    if let (Some(d), Some((r, half))) = (d, rel) {
        if d.significant() {
            return Some(Verdict::Differs {
                rel: r,
                half,
                better: (r > 0.0) == higher_is_better,
            });
        }
        if half <= precision {
            return Some(Verdict::NoDifference { half });
        }
    }
    if !last {
        return None;
    }
    let cv = larger_cv(&[sa, sb]);
    Some(Verdict::Undecided {
        half: rel.map(|(_, h)| h),
        needed: runs_to_detect(cv, DETECT),
    })
}

/// The verdict in words.
pub(crate) fn verdict_text(v: &Verdict, rounds: u32, a: &str, b: &str) -> String {
    match *v {
        Verdict::Differs { rel, half, better } => format!(
            "{b} is {:.1} % (± {:.1} %) {} than {a} after {rounds} rounds.",
            rel.abs() * 100.0,
            half * 100.0,
            if better { "better" } else { "worse" }
        ),
        Verdict::NoDifference { half } => format!(
            "No difference detected between {a} and {b} at this precision (± {:.1} %) after {rounds} rounds.",
            half * 100.0
        ),
        Verdict::Undecided { half, needed } => {
            let reached = half.map_or(String::new(), |h| {
                format!(" (± {:.1} % reached)", h * 100.0)
            });
            let more = match needed {
                Some(n) if u64::from(rounds) < n => format!(
                    "; about {} more rounds would be needed to detect {:.0} %",
                    n - u64::from(rounds),
                    DETECT * 100.0
                ),
                Some(_) => format!(
                    "; {:.0} % would have been detected, so any difference is smaller",
                    DETECT * 100.0
                ),
                None => String::new(),
            };
            format!(
                "No difference detected at this precision after {rounds} rounds{reached}{more}."
            )
        }
    }
}

/// Runs the comparison and prints each round and the verdict on standard
/// output.
#[allow(
    clippy::print_stdout,
    reason = "the rounds and the verdict are the command's output"
)]
pub fn run(opts: &Options) -> anyhow::Result<()> {
    if !(2..=MAX_ROUNDS).contains(&opts.max_rounds) {
        bail!("--max-rounds: 2 to {MAX_ROUNDS}");
    }
    if !(opts.precision > 0.0 && opts.precision < 1.0) {
        bail!("--precision: a share above 0 % and below 100 %");
    }
    if opts.a.label == opts.b.label {
        bail!("the two configurations need different labels");
    }
    opts.archive.check()?;
    let exe = crate::stoa_exe(opts.exe.as_deref())?;
    let work = tempfile::tempdir().context("cannot create a temporary directory")?;
    let mut rng = fastrand::Rng::with_seed(opts.seed);
    let metric_name = opts.metric.name(opts.kind);
    println!(
        "stoa bench ab: {} vs {}, {metric_name}, up to {} rounds, precision {:.1} % ({}-style, not SPEC results)",
        opts.a.label,
        opts.b.label,
        opts.max_rounds,
        opts.precision * 100.0,
        match opts.kind {
            Kind::Web => "SPECweb99",
            Kind::Mail => "SPECmail2001",
        }
    );
    println!(
        "{:>5}  {:<5}  {:>14}  {:>14}",
        "Round", "Order", opts.a.label, opts.b.label
    );
    let (mut va, mut vb) = (Vec::new(), Vec::new());
    let mut last = [None, None];
    for round in 1..=opts.max_rounds {
        let a_first = match opts.order {
            Order::Alternate => round % 2 == 1,
            Order::Random => rng.bool(),
        };
        let sides: [(usize, &Side); 2] = if a_first {
            [(0, &opts.a), (1, &opts.b)]
        } else {
            [(1, &opts.b), (0, &opts.a)]
        };
        let mut got = [0.0; 2];
        for (i, side) in sides {
            let dir = work.path().join(format!("round{round}-{i}"));
            let value = measure(opts, &exe, side, last[i], &dir)
                .with_context(|| format!("round {round}, {}", side.label))?;
            last[i] = Some(value);
            got[i] = value;
        }
        va.push(got[0]);
        vb.push(got[1]);
        println!(
            "{round:>5}  {:<5}  {:>14.2}  {:>14.2}",
            if a_first { "A B" } else { "B A" },
            got[0],
            got[1]
        );
        let _ = std::io::stdout().flush();
        if let Some(v) = judge(
            &va,
            &vb,
            opts.max_rounds,
            opts.precision,
            opts.metric.higher_is_better(),
        ) {
            let (sa, sb) = (Sample::of(&va), Sample::of(&vb));
            if let (Some(sa), Some(sb)) = (sa, sb) {
                println!(
                    "\n{}: {:.2} ± {:.2} vs {}: {:.2} ± {:.2} (mean ± sd over {round} rounds)",
                    opts.a.label, sa.mean, sa.sd, opts.b.label, sb.mean, sb.sd
                );
            }
            println!("{}", verdict_text(&v, round, &opts.a.label, &opts.b.label));
            println!(
                "(Welch's interval at {:.2} % confidence per look, the 5 % shared among {} looks at rounds {:?}.)",
                (1.0 - (1.0 - CONFIDENCE) / looks(opts.max_rounds).len() as f64) * 100.0,
                looks(opts.max_rounds).len(),
                looks(opts.max_rounds)
            );
            return Ok(());
        }
    }
    bail!("the rounds ended without a verdict")
}

/// One measurement of `side`: its setup, then one harness run; the figure.
fn measure(
    opts: &Options,
    exe: &Path,
    side: &Side,
    last: Option<f64>,
    dir: &Path,
) -> anyhow::Result<f64> {
    if let Some(cmd) = &side.setup {
        let status = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .stdin(Stdio::null())
            .status()
            .with_context(|| format!("cannot run the setup `{cmd}`"))?;
        if !status.success() {
            bail!("the setup `{cmd}` failed ({status})");
        }
    }
    let mut cmd = Command::new(exe);
    cmd.arg("bench").arg(opts.kind.name());
    cmd.args(&opts.harness_args).args(&side.harness_args);
    if opts.metric == Metric::Score {
        cmd.arg("--find-max");
        // A search that starts near this side's last score is a few trials
        // (unless the flags fix where it starts).
        let flag = match opts.kind {
            Kind::Web => "--connections",
            Kind::Mail => "--rate",
        };
        let fixed = opts
            .harness_args
            .iter()
            .chain(&side.harness_args)
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")));
        if let (Some(last), false) = (last, fixed) {
            cmd.arg(flag)
                .arg(format!("{}", (last * 0.9).round().max(1.0)));
        }
    }
    cmd.arg("--out").arg(dir);
    if opts.archive.off {
        cmd.arg("--no-archive");
    } else {
        cmd.arg("--archive").arg(opts.archive.dir());
        cmd.arg("--label").arg(&side.label);
    }
    let log = dir.with_extension("log");
    let file =
        std::fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .status()
        .with_context(|| format!("cannot run {}", exe.display()))?;
    if !status.success() {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        bail!(
            "the harness run failed ({status}): {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        );
    }
    let name = match opts.kind {
        Kind::Web => "report.json",
        Kind::Mail => "result.json",
    };
    let path = dir.join(name);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let figures = Figures::of(opts.kind, &json);
    opts.metric.pick(&figures).with_context(|| {
        format!(
            "the run has no {} (is the server's CPU measured? --server-pid)",
            opts.metric.name(opts.kind)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::gauss;

    /// Runs the sequential test on simulated rounds: A ~ N(100, noise), B ~
    /// N(100 (1 + effect), noise); the verdict and the rounds it took.
    fn simulate(rng: &mut fastrand::Rng, effect: f64, noise: f64, max: u32) -> (Verdict, u32) {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for round in 1..=max {
            a.push(100.0 * (1.0 + noise * gauss(rng)));
            b.push(100.0 * (1.0 + effect) * (1.0 + noise * gauss(rng)));
            if let Some(v) = judge(&a, &b, max, 0.005, true) {
                return (v, round);
            }
        }
        unreachable!("the last round always has a verdict")
    }

    #[test]
    fn looks_double_up_to_the_budget() {
        assert_eq!(looks(10), vec![3, 6, 10]);
        assert_eq!(looks(24), vec![3, 6, 12, 24]);
        assert_eq!(looks(3), vec![3]);
        assert_eq!(looks(2), vec![2]);
    }

    #[test]
    fn the_same_configuration_is_no_difference_in_at_least_95_percent_of_comparisons() {
        // 2,000 comparisons rather than 200: at the procedure's true rate
        // (3.9 % over 20,000 simulated comparisons) a batch of 200 has more
        // than 10 false claims about one time in six.
        let mut rng = fastrand::Rng::with_seed(2001);
        let wrong = (0..2000)
            .filter(|_| matches!(simulate(&mut rng, 0.0, 0.03, 24).0, Verdict::Differs { .. }))
            .count();
        assert!(wrong <= 100, "{wrong} of 2,000 claimed a difference");
    }

    #[test]
    fn a_real_3_percent_difference_is_found_most_of_the_time() {
        // 2 % noise per run (CPU per operation at a fixed load on this
        // machine); 24 rounds at most.
        let mut rng = fastrand::Rng::with_seed(1999);
        let mut found = 0;
        let mut rounds = 0;
        for _ in 0..200 {
            let (v, r) = simulate(&mut rng, 0.03, 0.02, 24);
            if matches!(v, Verdict::Differs { better: true, .. }) {
                found += 1;
                rounds += r;
            }
        }
        assert!(found >= 170, "found in {found} of 200");
        assert!(rounds / found <= 16, "{} rounds on average", rounds / found);
    }

    #[test]
    fn verdicts_read_as_sentences() {
        let v = Verdict::Differs {
            rel: -0.031,
            half: 0.012,
            better: false,
        };
        assert_eq!(
            verdict_text(&v, 6, "A", "B"),
            "B is 3.1 % (± 1.2 %) worse than A after 6 rounds."
        );
        let v = Verdict::Undecided {
            half: Some(0.04),
            needed: Some(36),
        };
        assert!(
            verdict_text(&v, 10, "A", "B")
                .contains("about 26 more rounds would be needed to detect 2 %")
        );
        let v = Verdict::NoDifference { half: 0.008 };
        assert!(verdict_text(&v, 12, "A", "B").contains("(± 0.8 %)"));
        // Lower is better for CPU: B using 5 % more is worse.
        let a = [10.0, 10.1, 9.9];
        let b = [10.5, 10.6, 10.4];
        assert!(matches!(
            judge(&a, &b, 10, 0.01, false),
            Some(Verdict::Differs { better: false, .. })
        ));
        assert_eq!(judge(&a[..2], &b[..2], 10, 0.01, false), None);
    }
}
