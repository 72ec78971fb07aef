//! Small inline SVG charts for the HTML report: no scripts, no external files, so
//! the page renders anywhere a browser can open a file.

use std::fmt::Write as _;

const W: f64 = 640.0;
const H: f64 = 280.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 45.0;
const COLORS: [&str; 5] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"];

/// Escapes text for SVG/HTML.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A tick step giving about five ticks up to `max`.
fn step(max: f64) -> f64 {
    let raw = (max / 5.0).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// Marks drawn behind a chart's data: shaded x ranges and labelled lines, in
/// data coordinates.
#[derive(Debug, Default)]
pub(crate) struct Marks<'a> {
    /// Shaded x ranges `(from, to, label)`: the phases outside the measurement.
    pub(crate) bands: Vec<(f64, f64, &'a str)>,
    /// Dashed vertical lines `(x, label)`: limits and thresholds.
    pub(crate) x_lines: Vec<(f64, &'a str)>,
    /// Dashed horizontal lines `(y, label)`.
    pub(crate) y_lines: Vec<(f64, &'a str)>,
}

/// How a chart's y axis maps values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Scale {
    /// 0 to `max`, linear.
    Linear(f64),
    /// Powers of ten from 10^`lo` to 10^`hi`, logarithmic: for times whose
    /// percentiles span decades.
    Log(i32, i32),
}

impl Scale {
    /// The log scale holding every positive value (at least one decade).
    fn log_of(values: impl Iterator<Item = f64>) -> Scale {
        let (lo, hi) = values
            .filter(|v| *v > 0.0 && v.is_finite())
            .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
        if lo > hi {
            return Scale::Log(0, 1);
        }
        let lo = lo.log10().floor() as i32;
        Scale::Log(lo, (hi.log10().ceil() as i32).max(lo + 1))
    }

    /// The y coordinate of `v` between `y0` (bottom) and `y1` (top).
    fn y(self, v: f64, y0: f64, y1: f64) -> f64 {
        let share = match self {
            Scale::Linear(max) => v / max.max(f64::MIN_POSITIVE),
            Scale::Log(lo, hi) => {
                (v.max(f64::MIN_POSITIVE).log10() - f64::from(lo)) / f64::from(hi - lo).max(1.0)
            }
        };
        y0 - share.clamp(0.0, 1.0) * (y0 - y1)
    }

    /// The tick values: about five steps, or every power of ten.
    fn ticks(self) -> Vec<f64> {
        match self {
            Scale::Linear(max) => {
                let s = step(max);
                (0..)
                    .map(|i| f64::from(i) * s)
                    .take_while(|v| *v <= max + 1e-9)
                    .collect()
            }
            Scale::Log(lo, hi) => (lo..=hi).map(|e| 10f64.powi(e)).collect(),
        }
    }
}

/// Opens a chart of height `h`: it scales with the page's width (viewBox,
/// width 100 %), keeping its proportions.
fn open(out: &mut String, h: f64, title: &str) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {h}\" width=\"100%\" \
         font-family=\"sans-serif\" font-size=\"11\">\
         <text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"13\">{}</text>",
        W / 2.0,
        escape(title)
    );
}

/// The axes, the y grid and labels, the x ticks when `x_max` is given, and
/// the axis titles, for a chart of the standard height.
fn frame(
    out: &mut String,
    title: &str,
    (x_label, y_label): (&str, &str),
    x_max: Option<f64>,
    y: Scale,
) {
    open(out, H, title);
    let (x0, y0, x1, y1) = (LEFT, H - BOTTOM, W - RIGHT, TOP);
    y_grid(out, y, (x0, y0, x1, y1));
    if let Some(x_max) = x_max {
        for v in Scale::Linear(x_max).ticks() {
            let x = x0 + v / x_max * (x1 - x0);
            let _ = write!(
                out,
                "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                y0 + 14.0,
                fmt_num(v)
            );
        }
    }
    let mid = (y0 + y1) / 2.0;
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\
         <text x=\"14\" y=\"{mid}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {mid})\">{}</text>",
        (x0 + x1) / 2.0,
        H - 8.0,
        escape(x_label),
        escape(y_label)
    );
}

/// The x and y axis lines and the y grid with its labels; a log axis is
/// marked `class="log-axis"`.
fn y_grid(out: &mut String, y: Scale, (x0, y0, x1, y1): (f64, f64, f64, f64)) {
    let class = if matches!(y, Scale::Log(..)) {
        " class=\"log-axis\""
    } else {
        ""
    };
    let _ = write!(
        out,
        "<g{class}><line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\" stroke=\"#333\"/>\
         <line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{y1}\" stroke=\"#333\"/>"
    );
    for v in y.ticks() {
        let py = y.y(v, y0, y1);
        let _ = write!(
            out,
            "<line x1=\"{x0}\" y1=\"{py:.1}\" x2=\"{x1}\" y2=\"{py:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            x0 - 4.0,
            py + 4.0,
            fmt_num(v)
        );
    }
    out.push_str("</g>");
}

/// Draws `marks` in the plot area, `px` and `py` mapping data to the chart.
fn draw_marks(
    out: &mut String,
    marks: &Marks<'_>,
    px: &dyn Fn(f64) -> f64,
    py: &dyn Fn(f64) -> f64,
) {
    let (y0, y1) = (H - BOTTOM, TOP);
    for (from, to, label) in &marks.bands {
        let (a, b) = (px(*from), px(*to));
        let _ = write!(
            out,
            "<rect class=\"phase\" x=\"{a:.1}\" y=\"{y1}\" width=\"{:.1}\" height=\"{}\" fill=\"#000\" \
             fill-opacity=\"0.08\"/><text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555\">{}</text>",
            (b - a).max(0.0),
            y0 - y1,
            (a + b) / 2.0,
            y0 - 4.0,
            escape(label)
        );
    }
    // Each line's label a row lower than the last's, so close lines' labels
    // do not overlap.
    for (i, (x, label)) in marks.x_lines.iter().enumerate() {
        let x = px(*x);
        let _ = write!(
            out,
            "<line class=\"limit\" x1=\"{x:.1}\" y1=\"{y0}\" x2=\"{x:.1}\" y2=\"{y1}\" stroke=\"#a31515\" \
             stroke-dasharray=\"4 3\"/><text x=\"{:.1}\" y=\"{}\" fill=\"#a31515\">{}</text>",
            x + 3.0,
            y1 + 10.0 + 12.0 * i as f64,
            escape(label)
        );
    }
    for (y, label) in &marks.y_lines {
        limit_line(out, py(*y), label, true);
    }
}

/// A dashed, labelled horizontal line across the plot area at `y` (chart
/// coordinates), the label at its right end when `right` (where the data
/// leaves room: a CDF rises on the left, a legend sits top right).
fn limit_line(out: &mut String, y: f64, label: &str, right: bool) {
    let (x, anchor) = if right {
        (W - RIGHT - 4.0, "end")
    } else {
        (LEFT + 4.0, "start")
    };
    let _ = write!(
        out,
        "<line class=\"limit\" x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#a31515\" \
         stroke-dasharray=\"4 3\"/><text x=\"{x}\" y=\"{:.1}\" text-anchor=\"{anchor}\" fill=\"#a31515\">{}</text>",
        W - RIGHT,
        y - 3.0,
        escape(label)
    );
}

fn fmt_num(v: f64) -> String {
    if v >= 1000.0 && v.fract().abs() < 1e-9 {
        let digits = format!("{v:.0}");
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else if v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else if v > 0.0 && v < 1.0 {
        // As many decimals as the value needs: 0.5, 0.05, 0.01 (a log
        // axis's lower decades).
        let decimals = (-v.log10()).ceil().max(1.0) as usize;
        format!("{v:.decimals$}")
    } else {
        format!("{v:.1}")
    }
}

/// A polyline of `points` in `color`, `px` and `py` mapping data to the chart.
fn polyline(
    out: &mut String,
    points: &[(f64, f64)],
    color: &str,
    px: &dyn Fn(f64) -> f64,
    py: &dyn Fn(f64) -> f64,
) {
    let path: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
        .collect();
    let _ = write!(
        out,
        "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>",
        path.join(" ")
    );
}

/// A line chart of several series of `(x, y)` points, scaled to their range,
/// with `marks` behind them (the phases outside the measurement, say).
pub(crate) fn lines(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    marks: &Marks<'_>,
) -> String {
    let x_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(x, _)| *x))
        .chain(marks.bands.iter().map(|b| b.1))
        .fold(1.0, f64::max);
    let y_max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
        .fold(1.0, f64::max)
        * 1.1;
    let y = Scale::Linear(y_max);
    let px = |x: f64| LEFT + x / x_max * (W - RIGHT - LEFT);
    let py = |v: f64| y.y(v, H - BOTTOM, TOP);
    let mut out = String::new();
    frame(&mut out, title, (x_label, y_label), Some(x_max), y);
    draw_marks(&mut out, marks, &px, &py);
    for (i, (name, points)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        polyline(&mut out, points, color, &px, &py);
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" fill=\"{color}\" text-anchor=\"end\">{}</text>",
            W - RIGHT - 6.0,
            TOP + 14.0 * (i as f64 + 1.0),
            escape(name)
        );
    }
    out.push_str("</svg>");
    out
}

/// A bar chart, one bar per labelled value, on a linear or log y axis (a log
/// scale spanning every value when `log`).
pub(crate) fn bars(
    title: &str,
    x_label: &str,
    y_label: &str,
    values: &[(String, f64)],
    log: bool,
) -> String {
    let y = if log {
        Scale::log_of(values.iter().map(|(_, v)| *v))
    } else {
        Scale::Linear(values.iter().map(|(_, v)| *v).fold(1.0, f64::max) * 1.1)
    };
    let mut out = String::new();
    frame(&mut out, title, (x_label, y_label), None, y);
    let n = values.len().max(1) as f64;
    let slot = (W - LEFT - RIGHT) / n;
    for (i, (label, v)) in values.iter().enumerate() {
        let top = y.y(*v, H - BOTTOM, TOP);
        let x = LEFT + slot * i as f64 + slot * 0.15;
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            slot * 0.7,
            H - BOTTOM - top,
            COLORS[0],
            x + slot * 0.35,
            H - BOTTOM + 14.0,
            escape(label)
        );
    }
    out.push_str("</svg>");
    out
}

/// A histogram on a numeric x axis: `bins` of `width` given by their lower
/// edge and count, with `marks` (a threshold, say) over the bars.
pub(crate) fn histogram(
    title: &str,
    (x_label, y_label): (&str, &str),
    bins: &[(f64, f64)],
    width: f64,
    marks: &Marks<'_>,
) -> String {
    let x_max = bins.iter().map(|(lo, _)| lo + width).fold(width, f64::max);
    let y = Scale::Linear(bins.iter().map(|(_, n)| *n).fold(1.0, f64::max) * 1.1);
    let px = |x: f64| LEFT + x.clamp(0.0, x_max) / x_max * (W - RIGHT - LEFT);
    let py = |v: f64| y.y(v, H - BOTTOM, TOP);
    let mut out = String::new();
    frame(&mut out, title, (x_label, y_label), Some(x_max), y);
    for (lo, n) in bins {
        let (a, b, top) = (px(*lo), px(lo + width), py(*n));
        let _ = write!(
            out,
            "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
            a + 1.0,
            (b - a - 2.0).max(0.5),
            H - BOTTOM - top,
            COLORS[0]
        );
    }
    draw_marks(&mut out, marks, &px, &py);
    out.push_str("</svg>");
    out
}

/// A line chart on fixed axes (x 0..`x_max`, y 0..`y_max`) with `marks`: for
/// series whose own range should not set the scale, such as a CDF in percent.
pub(crate) fn lines_fixed(
    title: &str,
    (x_label, y_label): (&str, &str),
    series: &[(String, Vec<(f64, f64)>)],
    (x_max, y_max): (f64, f64),
    marks: &Marks<'_>,
) -> String {
    let (x_max, y_max) = (x_max.max(f64::MIN_POSITIVE), y_max.max(f64::MIN_POSITIVE));
    let y = Scale::Linear(y_max);
    let px = |x: f64| LEFT + x.clamp(0.0, x_max) / x_max * (W - RIGHT - LEFT);
    let py = |v: f64| y.y(v.clamp(0.0, y_max), H - BOTTOM, TOP);
    let mut out = String::new();
    frame(&mut out, title, (x_label, y_label), Some(x_max), y);
    draw_marks(&mut out, marks, &px, &py);
    for (i, (name, points)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        polyline(&mut out, points, color, &px, &py);
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" fill=\"{color}\" text-anchor=\"end\">{}</text>",
            W - RIGHT - 6.0,
            H - BOTTOM - 10.0 - 14.0 * (series.len() - 1 - i) as f64,
            escape(name)
        );
    }
    out.push_str("</svg>");
    out
}

/// A grouped bar chart on a log y axis: for each group (x axis, labels
/// slanted), one bar per series; `series[s].1[g]` is series `s`'s value in
/// group `g`. `limit` draws a labelled horizontal line (a QoS limit).
pub(crate) fn grouped_bars(
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[(String, Vec<f64>)],
    limit: Option<(f64, &str)>,
) -> String {
    // Taller than the other charts: the slanted group labels need the room.
    const GH: f64 = 360.0;
    const GBOTTOM: f64 = 105.0;
    let y = Scale::log_of(
        series
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .chain(limit.map(|l| l.0)),
    );
    let (x0, y0, x1, y1) = (LEFT, GH - GBOTTOM, W - RIGHT, TOP);
    let mut out = String::new();
    open(&mut out, GH, title);
    y_grid(&mut out, y, (x0, y0, x1, y1));
    let _ = write!(
        out,
        "<text x=\"14\" y=\"{mid}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {mid})\">{}</text>",
        escape(y_label),
        mid = (y0 + y1) / 2.0,
    );
    let slot = (x1 - x0) / groups.len().max(1) as f64;
    let bar = slot * 0.8 / series.len().max(1) as f64;
    for (g, label) in groups.iter().enumerate() {
        let left = x0 + slot * g as f64 + slot * 0.1;
        for (s, (_, values)) in series.iter().enumerate() {
            let top = y.y(values.get(g).copied().unwrap_or(0.0), y0, y1);
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
                left + bar * s as f64,
                bar,
                y0 - top,
                COLORS[s % COLORS.len()]
            );
        }
        let cx = x0 + slot * (g as f64 + 0.5);
        let _ = write!(
            out,
            "<text x=\"{cx:.1}\" y=\"{ly}\" text-anchor=\"end\" transform=\"rotate(-40 {cx:.1} {ly})\">{}</text>",
            escape(label),
            ly = y0 + 12.0,
        );
    }
    if let Some((v, label)) = limit {
        limit_line(&mut out, y.y(v, y0, y1), label, false);
    }
    legend(&mut out, series.iter().map(|(name, _)| name.as_str()));
    out.push_str("</svg>");
    out
}

/// A colour key at the top right, one entry per series.
fn legend<'a>(out: &mut String, names: impl Iterator<Item = &'a str>) {
    for (s, name) in names.enumerate() {
        let _ = write!(
            out,
            "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{color}\"/>\
             <text x=\"{}\" y=\"{}\">{}</text>",
            W - RIGHT - 70.0,
            TOP + 14.0 * s as f64,
            W - RIGHT - 56.0,
            TOP + 14.0 * s as f64 + 9.0,
            escape(name),
            color = COLORS[s % COLORS.len()],
        );
    }
}

/// A bar chart of trials: one labelled bar per `(label, value, passed)`, green
/// when it passed and red when it failed.
pub(crate) fn pass_fail_bars(
    title: &str,
    x_label: &str,
    y_label: &str,
    values: &[(String, f64, bool)],
) -> String {
    const PASS: &str = "#2ca02c";
    const FAIL: &str = "#d62728";
    let y_max = values.iter().map(|(_, v, _)| *v).fold(1.0, f64::max) * 1.1;
    let mut out = String::new();
    frame(
        &mut out,
        title,
        (x_label, y_label),
        None,
        Scale::Linear(y_max),
    );
    let slot = (W - LEFT - RIGHT) / values.len().max(1) as f64;
    for (i, (label, v, passed)) in values.iter().enumerate() {
        let h = v.max(0.0) / y_max * (H - BOTTOM - TOP);
        let x = LEFT + slot * i as f64 + slot * 0.15;
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            H - BOTTOM - h,
            slot * 0.7,
            if *passed { PASS } else { FAIL },
            x + slot * 0.35,
            H - BOTTOM + 14.0,
            escape(label)
        );
    }
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" fill=\"{PASS}\">passed</text>\
         <text x=\"{}\" y=\"{}\" fill=\"{FAIL}\">failed</text>",
        LEFT + 10.0,
        TOP + 12.0,
        LEFT + 60.0,
        TOP + 12.0
    );
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_well_formed_svg_that_scale_with_the_page() {
        let series = [("it 1".to_owned(), vec![(0.0, 1.0), (1.0, 3.0)])];
        let l = lines("t<1>", "s", "ops/s", &series, &Marks::default());
        assert!(l.starts_with("<svg") && l.ends_with("</svg>"));
        assert!(l.contains("t&lt;1&gt;") && l.contains("<polyline"));
        assert!(
            l.contains("viewBox=\"0 0 640 280\" width=\"100%\"") && !l.contains("height=\"280\"")
        );
        let b = bars(
            "b",
            "p",
            "ms",
            &[("0".into(), 2.0), ("20".into(), 5.0)],
            false,
        );
        assert_eq!(b.matches("<rect").count(), 2);
        assert_eq!((step(100.0), step(7.0)), (20.0, 2.0));
        let g = grouped_bars(
            "t",
            "ms",
            &["a".into(), "b".into()],
            &[
                ("p50".into(), vec![1.0, 2.0]),
                ("p99".into(), vec![3.0, 4.0]),
            ],
            Some((5000.0, "5 s")),
        );
        assert_eq!(g.matches("<rect").count(), 4 + 2);
        assert!(
            g.contains("class=\"log-axis\"")
                && g.contains(">10,000<")
                && g.contains("class=\"limit\"")
        );
        let p = pass_fail_bars(
            "t",
            "trial",
            "mpm",
            &[("1".into(), 30.0, true), ("2".into(), 60.0, false)],
        );
        assert!(p.contains("#2ca02c") && p.contains("#d62728"));
    }

    #[test]
    fn a_log_axis_spaces_the_decades_evenly() {
        let y = Scale::log_of([3.0, 40.0, 1499.0].into_iter());
        assert_eq!(y, Scale::Log(0, 4));
        assert_eq!(y.ticks(), [1.0, 10.0, 100.0, 1000.0, 10000.0]);
        let small: Vec<String> = Scale::Log(-2, 0).ticks().into_iter().map(fmt_num).collect();
        assert_eq!(small, ["0.01", "0.1", "1"]);
        let at = |v| y.y(v, 200.0, 0.0);
        assert_eq!(
            (at(1.0), at(10.0), at(100.0), at(10000.0)),
            (200.0, 150.0, 100.0, 0.0)
        );
        let b = bars(
            "t",
            "percentile",
            "ms",
            &[("p50".into(), 3.0), ("max".into(), 1499.0)],
            true,
        );
        assert!(b.contains("class=\"log-axis\"") && b.contains(">1,000<"));
    }

    #[test]
    fn marks_are_drawn_where_their_values_fall() {
        let marks = Marks {
            bands: vec![(0.0, 5.0, "warm-up"), (65.0, 68.0, "ramp-down")],
            x_lines: vec![(320.0, "320 kbit/s")],
            y_lines: vec![(95.0, "95 %")],
        };
        let l = lines(
            "t",
            "s",
            "ops/s",
            &[("i".into(), vec![(0.0, 1.0), (68.0, 2.0)])],
            &marks,
        );
        assert_eq!(l.matches("class=\"phase\"").count(), 2);
        assert!(l.contains(">warm-up<") && l.contains(">ramp-down<"));
        // 320 of 440 across the 560 px plot area from x = 60.
        let h = histogram(
            "t",
            ("kbit/s", "n"),
            &[(0.0, 1.0), (420.0, 2.0)],
            20.0,
            &marks,
        );
        let x = LEFT + 320.0 / 440.0 * (W - LEFT - RIGHT);
        assert!(h.contains(&format!("class=\"limit\" x1=\"{x:.1}\"")), "{h}");
        assert!(h.contains(">320 kbit/s<"));
    }
}
