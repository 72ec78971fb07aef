//! The statistics of judging two configurations: the mean of each one's runs,
//! the difference of the means with its 95 % confidence interval (Welch's
//! t-interval: the two need not have the same spread or the same number of
//! runs), and how many runs a difference of a given size would need.
//!
//! On this kind of machine one run's noise is a few per cent, so a single pair
//! of runs cannot tell a 2 % change from none; these are what `stoa bench
//! compare` prints for configurations with several runs each.

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// The confidence of the intervals `compare` prints (and `ab` shares among its looks).
pub(crate) const CONFIDENCE: f64 = 0.95;

/// Mean, sample standard deviation and count of `xs`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sample {
    pub(crate) mean: f64,
    /// Sample standard deviation (n − 1); 0 for a single value.
    pub(crate) sd: f64,
    pub(crate) n: usize,
}

impl Sample {
    /// `None` for no values or a value that is not finite.
    pub(crate) fn of(xs: &[f64]) -> Option<Sample> {
        if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let sd = if n < 2 {
            0.0
        } else {
            (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        };
        Some(Sample { mean, sd, n })
    }

    /// The coefficient of variation, sd ÷ |mean|; `None` at a mean of 0.
    pub(crate) fn cv(&self) -> Option<f64> {
        (self.mean != 0.0).then(|| self.sd / self.mean.abs())
    }
}

/// The larger coefficient of variation of `samples` (0 when none has one):
/// the spread a "runs needed" estimate assumes.
pub(crate) fn larger_cv(samples: &[Option<Sample>]) -> f64 {
    samples
        .iter()
        .flatten()
        .filter_map(Sample::cv)
        .fold(0.0, f64::max)
}

/// B − A with its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Difference {
    /// mean(B) − mean(A).
    pub(crate) diff: f64,
    /// Half-width of the interval around `diff` (95 % unless asked otherwise).
    pub(crate) half_width: f64,
    /// Welch–Satterthwaite degrees of freedom (infinite when both spreads are 0).
    pub(crate) df: f64,
    /// The mean of A, the base of the relative figures.
    pub(crate) base: f64,
}

impl Difference {
    /// Welch's 95 % interval for mean(b) − mean(a); `None` unless each has at
    /// least two runs.
    pub(crate) fn welch(a: &Sample, b: &Sample) -> Option<Difference> {
        Difference::welch_at(a, b, CONFIDENCE)
    }

    /// Welch's interval at `confidence` (0–1), for a test that looks at the
    /// data several times and must share its 5 % among the looks.
    pub(crate) fn welch_at(a: &Sample, b: &Sample, confidence: f64) -> Option<Difference> {
        if a.n < 2 || b.n < 2 || !(0.0..1.0).contains(&confidence) {
            return None;
        }
        let (va, vb) = (a.sd.powi(2) / a.n as f64, b.sd.powi(2) / b.n as f64);
        let se = (va + vb).sqrt();
        let diff = b.mean - a.mean;
        if se == 0.0 {
            return Some(Difference {
                diff,
                half_width: 0.0,
                df: f64::INFINITY,
                base: a.mean,
            });
        }
        let df =
            (va + vb).powi(2) / (va.powi(2) / (a.n - 1) as f64 + vb.powi(2) / (b.n - 1) as f64);
        let t = t_quantile(0.5 + confidence / 2.0, df)?;
        Some(Difference {
            diff,
            half_width: t * se,
            df,
            base: a.mean,
        })
    }

    /// Whether the interval leaves out zero: a difference, at 95 %.
    pub(crate) fn significant(&self) -> bool {
        self.diff.abs() > self.half_width
    }

    /// The difference and the half-width as shares of A's mean (the interval
    /// of the ratio is approximated by that of the difference over A's mean,
    /// close enough while A's own spread is a few per cent); `None` at a base
    /// of 0.
    pub(crate) fn relative(&self) -> Option<(f64, f64)> {
        (self.base != 0.0).then(|| (self.diff / self.base, self.half_width / self.base.abs()))
    }
}

/// Runs per configuration that detect a relative difference `effect` (0.02
/// for 2 %) with 80 % power at 95 % confidence, for runs whose coefficient of
/// variation is `cv` (normal approximation: n = 2 (z₀.₉₇₅ + z₀.₈)² cv² / effect²,
/// at least 2).
pub(crate) fn runs_to_detect(cv: f64, effect: f64) -> Option<u64> {
    if !(cv.is_finite() && effect.is_finite() && effect > 0.0 && cv >= 0.0) {
        return None;
    }
    let normal = Normal::new(0.0, 1.0).ok()?;
    let z = normal.inverse_cdf(0.5 + CONFIDENCE / 2.0) + normal.inverse_cdf(0.8);
    let n = 2.0 * (z * cv / effect).powi(2);
    (n.is_finite() && n < 1e12).then(|| (n.ceil() as u64).max(2))
}

/// The `p` quantile of Student's t with `df` degrees of freedom.
fn t_quantile(p: f64, df: f64) -> Option<f64> {
    if df.is_infinite() {
        return Normal::new(0.0, 1.0).ok().map(|n| n.inverse_cdf(p));
    }
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    let q = t.inverse_cdf(p);
    q.is_finite().then_some(q)
}

/// A standard normal draw (Box–Muller), for the simulations of the tests.
#[cfg(test)]
pub(crate) fn gauss(rng: &mut fastrand::Rng) -> f64 {
    let (u, v) = (rng.f64().max(1e-12), rng.f64());
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_figures() {
        let s = Sample::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).expect("the test's own data");
        assert!((s.mean - 5.0).abs() < 1e-12);
        assert!((s.sd - 2.138_089_935).abs() < 1e-6);
        assert_eq!(Sample::of(&[3.0]).expect("the test's own data").sd, 0.0);
        assert!(Sample::of(&[]).is_none());
        assert!(Sample::of(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        // Two-sided 95 %: 12.706 at 1 df, 2.228 at 10, 1.960 at infinity.
        assert!((t_quantile(0.975, 1.0).expect("the test's own data") - 12.706).abs() < 1e-3);
        assert!((t_quantile(0.975, 10.0).expect("the test's own data") - 2.228).abs() < 1e-3);
        assert!(
            (t_quantile(0.975, f64::INFINITY).expect("the test's own data") - 1.960).abs() < 1e-3
        );
    }

    #[test]
    fn welch_interval_of_a_textbook_case() {
        // Equal sizes and spreads: df = 2n − 2, the pooled interval.
        let a = Sample::of(&[10.0, 12.0, 11.0, 13.0, 9.0]).expect("the test's own data");
        let b = Sample::of(&[14.0, 16.0, 15.0, 17.0, 13.0]).expect("the test's own data");
        let d = Difference::welch(&a, &b).expect("the test's own data");
        assert!((d.diff - 4.0).abs() < 1e-12);
        assert!((d.df - 8.0).abs() < 1e-9);
        // se = sqrt(2.5/5 + 2.5/5) = 1; t(0.975, 8) = 2.306.
        assert!((d.half_width - 2.306).abs() < 1e-3);
        assert!(d.significant());
        let (rel, half) = d.relative().expect("the test's own data");
        assert!((rel - 4.0 / 11.0).abs() < 1e-12 && (half - 2.306 / 11.0).abs() < 1e-3);
        assert!(Difference::welch(&Sample::of(&[1.0]).expect("the test's own data"), &b).is_none());
    }

    #[test]
    fn identical_noise_is_rarely_a_difference() {
        // 200 comparisons of A = B, five runs each, 3 % noise: about 5 % of
        // 95 % intervals leave out zero; well under 10 % must.
        let mut rng = fastrand::Rng::with_seed(99);
        let mut false_alarms = 0;
        for _ in 0..200 {
            let a: Vec<f64> = (0..5)
                .map(|_| 100.0 * (1.0 + 0.03 * gauss(&mut rng)))
                .collect();
            let b: Vec<f64> = (0..5)
                .map(|_| 100.0 * (1.0 + 0.03 * gauss(&mut rng)))
                .collect();
            let d = Difference::welch(
                &Sample::of(&a).expect("the test's own data"),
                &Sample::of(&b).expect("the test's own data"),
            )
            .expect("the test's own data");
            if d.significant() {
                false_alarms += 1;
            }
        }
        assert!(false_alarms <= 20, "{false_alarms} of 200");
    }

    #[test]
    fn runs_needed_grow_with_noise() {
        // cv 3 %, effect 2 %: 2 × (1.96 + 0.84)² × 2.25 ≈ 35.3 → 36.
        assert_eq!(runs_to_detect(0.03, 0.02), Some(36));
        assert_eq!(runs_to_detect(0.0, 0.02), Some(2));
        assert_eq!(runs_to_detect(0.03, 0.0), None);
    }
}
