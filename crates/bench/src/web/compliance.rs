//! Whether a `stoa bench web` run is the kit's run (web99.md §8.1): the
//! standard profile's phases, at least three iterations at one load and their
//! median, full decks, the kit's validity rule and class-mix check, the kit's
//! request mix and pacing. Anything else is listed as a [`Deviation`], and the
//! report prints the score as non-compliant.

use crate::compliance::{Deviation, grouped, rule, seconds};

use super::{Options, Profile, STANDARD};

/// The kit's run: the standard profile (web99.md §8.1).
pub(crate) const KIT: Profile = STANDARD;

/// Every way a run of `args` over the phases of `profile` (what ran) differs
/// from the kit's run, in the order the report lists them.
pub(crate) fn deviations(args: &Options, profile: &Profile) -> Vec<Deviation> {
    let iterations = args.iterations.unwrap_or(profile.iterations);
    // Ramp-up precedes every iteration (or `--find-max` trial) after the first.
    let ramps = args.find_max || iterations > 1;
    let https = args.tls
        || args
            .target
            .as_deref()
            .is_some_and(|t| t.starts_with("https://"));
    let (run, kit) = (seconds(profile.run), seconds(KIT.run));
    let median = format!(
        "the kit runs {} at one load and reports the median",
        KIT.iterations
    );
    [
        rule(
            "run_time",
            profile.run != KIT.run,
            format!("measured {run}"),
            format!("the kit measures {kit}"),
        ),
        rule(
            "warmup",
            profile.warmup < KIT.warmup,
            format!("warm-up {}", seconds(profile.warmup)),
            format!("the kit warms up at least {}", seconds(KIT.warmup)),
        ),
        rule(
            "rampup",
            ramps && profile.rampup != KIT.rampup,
            format!("ramp-up {} between iterations", seconds(profile.rampup)),
            format!("the kit's is {}", seconds(KIT.rampup)),
        ),
        rule(
            "rampdown",
            profile.rampdown != KIT.rampdown,
            format!("ramp-down {}", seconds(profile.rampdown)),
            format!("the kit's is {}", seconds(KIT.rampdown)),
        ),
        rule(
            "iterations",
            !args.find_max && iterations < KIT.iterations,
            crate::report::count(u64::from(iterations), "iteration"),
            median.clone(),
        ),
        rule(
            "find_max",
            args.find_max,
            "--find-max: the score is the best passing trial of a search, one iteration each",
            median,
        ),
        rule(
            "deck",
            profile.deck != KIT.deck,
            format!("{}-entry decks", grouped(profile.deck as u64)),
            format!(
                "the kit's run draws full decks of {} (web99.md §3.4)",
                grouped(KIT.deck as u64)
            ),
        ),
        rule(
            "validity",
            profile.validity != KIT.validity,
            "a connection without a class-3 operation still counts as valid",
            "the kit requires an operation of every class (web99.md §5.3)",
        ),
        // The report checks the class mix on standard runs only.
        rule(
            "class_mix",
            !profile.checks_class_mix(),
            "class mix not checked",
            "the kit fails a class more than 10.5 % off its share (web99.md §7.3)",
        ),
        rule(
            "static_only",
            args.static_only,
            "static GETs only (--static-only)",
            "the kit's mix is 70 % static, 30 % dynamic (web99.md §4.1)",
        ),
        rule(
            "closed_loop",
            args.closed_loop,
            "closed loop (--closed-loop): no pacing, every connection kept alive",
            "the kit paces each connection to 400 kbit/s and carries 70 % of requests on \
             keep-alive connections (web99.md §4.3, §5.1)",
        ),
        rule(
            "http2",
            args.http.is_http2(),
            "HTTP/2 (--http 2): the kit's requests, one stream at a time on each connection",
            "the kit sends HTTP/1.0 and HTTP/1.1 requests (web99.md §4.4)",
        ),
        rule(
            "tls_cipher",
            https,
            "HTTPS with today's TLS suites",
            "SPECweb99_SSL requires SSL_RSA_WITH_RC4_128_SHA with a 1,024-bit RSA key, \
             which TLS no longer offers (web99.md §9)",
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The run-rule readings the report's notes print, where the kit's documents
/// leave a choice (web99.md §8.1).
pub(crate) const INTERPRETATIONS: [&str; 3] = [
    "Run rules: three or more iterations at one load count as the kit's run (the median is reported); \
     the warm-up may be longer than 1,200 s, every other phase must be the kit's length.",
    "Decks: the standard profile's 1,000-entry decks stand for the kit's full decks, whose size the \
     kit's documents do not fix (web99.md §3.4).",
    "HTTPS: every run over TLS lists the cipher as a deviation, since the SSL kit's suite (RC4-SHA \
     with a 1,024-bit RSA key) is no longer offered by TLS, so no modern run matches it.",
];

/// The box's closing note: how to make the kit's run, and how long it takes.
pub(crate) fn kit_run() -> String {
    let n = KIT.iterations;
    let total = KIT.warmup + (KIT.run + KIT.rampdown) * n + KIT.rampup * (n - 1);
    let minutes = total.as_secs().div_ceil(60);
    format!(
        "The kit's run: stoa bench web --profile standard ({} warm-up, then {n} iterations of \
         {} measured and {} ramp-down with {} ramp-up between them: about {} h {:02} min), \
         without --run-time, --iterations under {n}, --static-only, --closed-loop, --find-max, \
         --http 2 or HTTPS.",
        seconds(KIT.warmup),
        seconds(KIT.run),
        seconds(KIT.rampdown),
        seconds(KIT.rampup),
        minutes / 60,
        minutes % 60
    )
}

#[cfg(test)]
mod tests;
