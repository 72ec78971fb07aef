use super::*;

/// Pearson's χ² statistic of observed counts against expected probabilities.
fn chi2(observed: &[usize], probabilities: &[f64]) -> f64 {
    let n: usize = observed.iter().sum();
    observed
        .iter()
        .zip(probabilities)
        .map(|(&o, &p)| {
            let e = p * n as f64;
            (o as f64 - e).powi(2) / e
        })
        .sum()
}

/// χ² critical values at p = 0.001 (a loose bound: a correct sampler fails one run
/// in a thousand seeds; the seeds here are fixed) for the degrees of freedom used.
fn critical(df: usize) -> f64 {
    match df {
        9 => 27.88,
        19 => 43.82,
        21 => 46.80,
        _ => panic!("no table entry for {df} degrees of freedom"),
    }
}

/// Counts of `draw` over `n` samples, one bin per table value.
fn histogram(table: &[(u32, f64)], n: usize, mut draw: impl FnMut() -> u32) -> Vec<usize> {
    let mut counts = vec![0usize; table.len()];
    for _ in 0..n {
        let v = draw();
        let i = table
            .iter()
            .position(|&(t, _)| t == v)
            .expect("value in table");
        counts[i] += 1;
    }
    counts
}

#[test]
fn tables_sum_to_one_and_have_the_stated_means() {
    let sum = |t: &[(u32, f64)]| t.iter().map(|&(_, p)| p).sum::<f64>();
    assert!((sum(&MSG_SIZE_DISTRIBUTION) - 1.0).abs() < 1e-9);
    assert!((sum(&MSG_RECP_DISTRIBUTION) - 1.0).abs() < 1e-9);
    // §1.6: 24.53 KB; §1.7: exactly 2.00.
    assert!((mean_size_kb() - 24.53).abs() < 0.005, "{}", mean_size_kb());
    assert!(
        (mean_recipients() - 2.0).abs() < 0.005,
        "{}",
        mean_recipients()
    );
    assert_eq!(MSG_RECP_DISTRIBUTION.last().map(|r| r.0), Some(20));
    // Cumulative column of §1.6.
    let cum: Vec<f64> = MSG_SIZE_DISTRIBUTION
        .iter()
        .scan(0.0, |acc, &(_, p)| {
            *acc += p;
            Some(*acc)
        })
        .collect();
    for (c, want) in cum.iter().zip([
        0.1020, 0.4091, 0.6150, 0.7228, 0.7816, 0.8190, 0.8934, 0.9913, 0.9982, 1.0,
    ]) {
        assert!((c - want).abs() < 1e-9, "{cum:?}");
    }
}

#[test]
fn from_uniform_edges() {
    assert_eq!(from_uniform(&MSG_SIZE_DISTRIBUTION, 0.0), 1);
    assert_eq!(from_uniform(&MSG_SIZE_DISTRIBUTION, 0.1019), 1);
    assert_eq!(from_uniform(&MSG_SIZE_DISTRIBUTION, 0.1021), 2);
    assert_eq!(from_uniform(&MSG_SIZE_DISTRIBUTION, 0.9999), 2_675);
    assert_eq!(from_uniform(&MSG_SIZE_DISTRIBUTION, 1.0), 2_675);
    assert_eq!(from_uniform(&MSG_RECP_DISTRIBUTION, 0.5), 1);
}

#[test]
fn sizes_follow_the_table() {
    let mut rng = Rng::with_seed(2001);
    let n = 1_000_000;
    let mut bytes = 0u64;
    let counts = histogram(&MSG_SIZE_DISTRIBUTION, n, || {
        let b = message_size_bytes(&mut rng);
        bytes += b;
        (b / BYTES_PER_KB) as u32
    });
    let p: Vec<f64> = MSG_SIZE_DISTRIBUTION.iter().map(|r| r.1).collect();
    assert!(chi2(&counts, &p) < critical(9), "{counts:?}");
    // Sample mean within 2 % of 24.53 KB (the standard error is about 0.14 KB).
    let mean_kb = bytes as f64 / n as f64 / BYTES_PER_KB as f64;
    assert!((mean_kb / mean_size_kb() - 1.0).abs() < 0.02, "{mean_kb}");
}

#[test]
fn recipients_follow_the_table() {
    let mut rng = Rng::with_seed(7);
    let n = 1_000_000;
    let mut total = 0u64;
    let counts = histogram(&MSG_RECP_DISTRIBUTION, n, || {
        let r = recipient_count(&mut rng);
        total += u64::from(r);
        r
    });
    let p: Vec<f64> = MSG_RECP_DISTRIBUTION.iter().map(|r| r.1).collect();
    assert!(chi2(&counts, &p) < critical(19), "{counts:?}");
    let mean = total as f64 / n as f64;
    assert!((mean - 2.0).abs() < 0.01, "{mean}");
}

#[test]
fn local_and_modem_shares() {
    let mut rng = Rng::with_seed(99);
    let n = 1_000_000;
    let local = (0..n).filter(|_| recipient_is_local(&mut rng)).count();
    let modem = (0..n).filter(|_| session_is_modem(&mut rng)).count();
    // Binomial standard deviation is 300 for both; allow 5 of them.
    assert!((local as f64 - 100_000.0).abs() < 1_500.0, "{local}");
    assert!((modem as f64 - 900_000.0).abs() < 1_500.0, "{modem}");
}

#[test]
fn exponential_mean_is_one_over_rate() {
    for (seed, rate) in [(1u64, 237.5), (2, 0.025), (3, 1.0)] {
        let mut rng = Rng::with_seed(seed);
        let n = 400_000;
        let xs: Vec<f64> = (0..n).map(|_| exponential_secs(&mut rng, rate)).collect();
        assert!(xs.iter().all(|x| x.is_finite() && *x >= 0.0));
        let mean = xs.iter().sum::<f64>() / n as f64;
        // Standard error is mean/√n ≈ 0.16 %; allow 1 %.
        assert!((mean * rate - 1.0).abs() < 0.01, "rate {rate}: mean {mean}");
        // Memorylessness check: P(X > mean) = 1/e.
        let above = xs.iter().filter(|&&x| x > 1.0 / rate).count() as f64 / n as f64;
        assert!((above - (-1.0f64).exp()).abs() < 0.005, "{above}");
    }
    let mut rng = Rng::with_seed(4);
    assert_eq!(exponential_secs(&mut rng, 0.0), f64::INFINITY);
}

#[test]
fn mailbox_model_reproduces_table_2() {
    for &(count, share) in &MAILBOX_DISTRIBUTION {
        let model = mailbox_share(count);
        assert!(
            (model - share).abs() <= 0.00005 + 1e-12,
            "{count}: {model} vs {share}"
        );
    }
    assert!((mailbox_share(0) - 0.2650).abs() < 5e-5);
    assert!((mean_mailbox_messages() - 3.43).abs() < 1e-9);
    let tail: f64 = 1.0 - (0..30).map(mailbox_share).sum::<f64>();
    assert!(tail > 0.0 && tail < 0.001, "{tail}");
}

#[test]
fn initial_mailbox_counts_follow_the_model() {
    let mut rng = Rng::with_seed(11);
    let n = 1_000_000;
    // Bins 0..=20 and one tail bin for 21 and more: 21 degrees of freedom.
    let mut counts = vec![0usize; 22];
    let mut total = 0u64;
    for _ in 0..n {
        let c = initial_mailbox_count(&mut rng);
        total += u64::from(c);
        counts[(c as usize).min(21)] += 1;
    }
    let mut p: Vec<f64> = (0..21).map(mailbox_share).collect();
    p.push(1.0 - p.iter().sum::<f64>());
    assert!(chi2(&counts, &p) < critical(21), "{counts:?}");
    let mean = total as f64 / n as f64;
    assert!((mean - 3.43).abs() < 0.03, "{mean}");
}

#[test]
fn chi2_rejects_a_wrong_table() {
    // The test above must be able to fail: samples from the table, judged against
    // a table with 1 KB and 2 KB swapped, exceed the critical value by far.
    let mut rng = Rng::with_seed(5);
    let counts = histogram(&MSG_SIZE_DISTRIBUTION, 100_000, || {
        message_size_kb(&mut rng)
    });
    let mut p: Vec<f64> = MSG_SIZE_DISTRIBUTION.iter().map(|r| r.1).collect();
    p.swap(0, 1);
    assert!(chi2(&counts, &p) > critical(9));
}
