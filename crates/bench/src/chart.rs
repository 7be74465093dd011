//! PNG charts (grouped bar charts) drawn with plotters' bitmap backend.
//!
//! Text needs a TrueType font: the first of `DAMSELFLY_BENCH_FONT` and a list of
//! common system paths (Debian `fonts-dejavu-core` provides DejaVuSans.ttf) is
//! registered with plotters. Without any font the charts are drawn without text.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontStyle;

const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "/Library/Fonts/Arial.ttf",
];

/// Register a font once; returns whether text can be drawn.
pub fn font_available() -> bool {
    static FONT: OnceLock<bool> = OnceLock::new();
    *FONT.get_or_init(|| {
        let mut paths: Vec<String> = Vec::new();
        if let Ok(p) = std::env::var("DAMSELFLY_BENCH_FONT") {
            paths.push(p);
        }
        paths.extend(FONT_CANDIDATES.iter().map(|s| s.to_string()));
        for p in paths {
            if let Ok(bytes) = std::fs::read(&p) {
                let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, leaked).is_ok()
                {
                    return true;
                }
            }
        }
        eprintln!(
            "note: no TrueType font found (install fonts-dejavu-core or set DAMSELFLY_BENCH_FONT); charts will have no text"
        );
        false
    })
}

/// Series colours (colour-blind friendly Okabe-Ito palette).
const PALETTE: &[RGBColor] = &[
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

pub struct BarChart<'a> {
    pub title: &'a str,
    pub y_desc: &'a str,
    pub categories: &'a [String],
    /// (series name, one value per category; None = not measured)
    pub series: &'a [(String, Vec<Option<f64>>)],
}

fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".to_string()
    } else if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}K", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}K", v / 1e3)
    } else if a >= 10.0 || (a >= 1.0 && v.fract() == 0.0) {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

type Chart<'a, 'b> =
    ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The white canvas, margins, label areas and title every chart here shares.
fn frame<'a, 'b>(
    root: &'a DrawingArea<BitMapBackend<'b>, plotters::coord::Shift>,
    title: &str,
    text: bool,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> Result<Chart<'a, 'b>, String> {
    root.fill(&WHITE).map_err(|x| x.to_string())?;
    let mut builder = ChartBuilder::on(root);
    builder
        .margin(16)
        .x_label_area_size(if text { 56 } else { 8 })
        .y_label_area_size(if text { 80 } else { 8 });
    if text {
        builder.caption(title, ("sans-serif", 22));
    }
    builder.build_cartesian_2d(x, y).map_err(|x| x.to_string())
}

/// The series legend, in the same style on every chart.
fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, at: SeriesLabelPosition) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|x| x.to_string())
}

/// Draw a grouped bar chart into a PNG file.
pub fn grouped_bars(path: &Path, c: &BarChart<'_>) -> Result<(), String> {
    let text = font_available();
    let ncat = c.categories.len().max(1);
    let nser = c.series.len().max(1);
    let width = (220 + ncat * (40 + 22 * nser)).clamp(640, 2400) as u32;
    let height = 520u32;
    let ymax = c
        .series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .fold(0.0f64, |a, &b| a.max(b));
    let ymax = if ymax > 0.0 { ymax * 1.15 } else { 1.0 };

    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    let e = |err: &dyn std::fmt::Display| format!("drawing {}: {err}", path.display());
    let mut chart =
        frame(&root, c.title, text, 0f64..ncat as f64, 0f64..ymax).map_err(|x| e(&x))?;
    {
        let mut mesh = chart.configure_mesh();
        mesh.disable_x_mesh()
            .x_labels(0)
            .light_line_style(RGBColor(235, 235, 235));
        if text {
            mesh.y_desc(c.y_desc)
                .y_label_formatter(&|v| fmt_value(*v))
                .label_style(("sans-serif", 14))
                .axis_desc_style(("sans-serif", 15));
        } else {
            mesh.y_labels(0);
        }
        mesh.draw().map_err(|x| e(&x))?;
    }

    let group_w = 0.8;
    let bar_w = group_w / nser as f64;
    for (si, (name, vals)) in c.series.iter().enumerate() {
        let color = PALETTE[si % PALETTE.len()];
        let bars = vals.iter().enumerate().filter_map(|(ci, v)| {
            v.map(|v| {
                let x0 = ci as f64 + 0.1 + si as f64 * bar_w;
                Rectangle::new([(x0, 0.0), (x0 + bar_w * 0.92, v)], color.filled())
            })
        });
        let drawn = chart.draw_series(bars).map_err(|x| e(&x))?;
        if text {
            drawn.label(name.as_str()).legend(move |(x, y)| {
                Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled())
            });
        }
    }
    if text {
        // Value labels above the bars (only when they fit).
        if ncat * nser <= 40 {
            let style = TextStyle::from(("sans-serif", 11).into_font())
                .pos(Pos::new(HPos::Center, VPos::Bottom));
            for (si, (_, vals)) in c.series.iter().enumerate() {
                for (ci, v) in vals.iter().enumerate() {
                    if let Some(v) = v {
                        let xc = ci as f64 + 0.1 + si as f64 * bar_w + bar_w * 0.46;
                        let (px, py) = chart.backend_coord(&(xc, *v));
                        root.draw(&Text::new(fmt_value(*v), (px, py - 2), style.clone()))
                            .map_err(|x| e(&x))?;
                    }
                }
            }
        }
        // Category labels under each group.
        let style =
            TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        for (ci, name) in c.categories.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(ci as f64 + 0.5, 0.0));
            root.draw(&Text::new(name.clone(), (px, py + 8), style.clone()))
                .map_err(|x| e(&x))?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight).map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

pub struct LineChart<'a> {
    pub title: &'a str,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    /// (series name, points in x order)
    pub series: &'a [(String, Vec<(f64, f64)>)],
}

/// Draw one line with markers per series (e.g. latency against throughput) into a PNG file.
pub fn lines(path: &Path, c: &LineChart<'_>) -> Result<(), String> {
    let text = font_available();
    let pts = || c.series.iter().flat_map(|(_, v)| v.iter());
    let xmax = pts().fold(0.0f64, |a, p| a.max(p.0));
    let ymax = pts().fold(0.0f64, |a, p| a.max(p.1));
    let xmax = if xmax > 0.0 { xmax * 1.05 } else { 1.0 };
    let ymax = if ymax > 0.0 { ymax * 1.1 } else { 1.0 };
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    let e = |err: &dyn std::fmt::Display| format!("drawing {}: {err}", path.display());
    let mut chart = frame(&root, c.title, text, 0f64..xmax, 0f64..ymax).map_err(|x| e(&x))?;
    {
        let mut mesh = chart.configure_mesh();
        mesh.light_line_style(RGBColor(235, 235, 235));
        if text {
            mesh.x_desc(c.x_desc)
                .y_desc(c.y_desc)
                .x_label_formatter(&|v| fmt_value(*v))
                .y_label_formatter(&|v| fmt_value(*v))
                .label_style(("sans-serif", 14))
                .axis_desc_style(("sans-serif", 15));
        } else {
            mesh.x_labels(0).y_labels(0);
        }
        mesh.draw().map_err(|x| e(&x))?;
    }
    for (si, (name, points)) in c.series.iter().enumerate() {
        let color = PALETTE[si % PALETTE.len()];
        let drawn = chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|x| e(&x))?;
        if text {
            drawn.label(name.as_str()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        }
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(|x| e(&x))?;
    }
    if text {
        legend(&mut chart, SeriesLabelPosition::UpperLeft).map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// `damselfly-bench chart`: draws a chart from a tab-separated file, for the scripts that
/// measure (scripts/bench-latency.sh). Lines: `series, x, y` per row; bars:
/// `category, series, value` per row. Rows keep their order of first appearance.
#[derive(clap::Parser, Debug)]
#[command(about = "Draw a PNG chart from a tab-separated file")]
pub struct ChartOpts {
    /// lines (series, x, y) or bars (category, series, value).
    #[arg(long, value_parser = ["lines", "bars"])]
    pub kind: String,
    #[arg(long, default_value = "")]
    pub title: String,
    #[arg(long = "x-desc", default_value = "")]
    pub x_desc: String,
    #[arg(long = "y-desc", default_value = "")]
    pub y_desc: String,
    /// Input file (tab-separated, no header; `#` starts a comment line).
    #[arg(long)]
    pub input: std::path::PathBuf,
    /// Output PNG.
    #[arg(long)]
    pub out: std::path::PathBuf,
}

pub fn run_chart(o: &ChartOpts) -> Result<(), String> {
    let text = std::fs::read_to_string(&o.input)
        .map_err(|err| format!("reading {}: {err}", o.input.display()))?;
    let mut rows: Vec<[&str; 3]> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 3 {
            return Err(format!(
                "{}:{}: want 3 tab-separated fields",
                o.input.display(),
                i + 1
            ));
        }
        rows.push([f[0], f[1], f[2]]);
    }
    let num = |v: &str| -> Result<f64, String> {
        v.trim()
            .parse::<f64>()
            .map_err(|_| format!("not a number: {v:?}"))
    };
    fn index(names: &mut Vec<String>, n: &str) -> usize {
        match names.iter().position(|x| x == n) {
            Some(i) => i,
            None => {
                names.push(n.to_string());
                names.len() - 1
            }
        }
    }
    if o.kind == "lines" {
        let mut names: Vec<String> = Vec::new();
        let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for [name, x, y] in rows {
            let i = index(&mut names, name);
            if i == series.len() {
                series.push((name.to_string(), Vec::new()));
            }
            series[i].1.push((num(x)?, num(y)?));
        }
        for (_, p) in series.iter_mut() {
            p.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        lines(
            &o.out,
            &LineChart {
                title: &o.title,
                x_desc: &o.x_desc,
                y_desc: &o.y_desc,
                series: &series,
            },
        )
    } else {
        let (mut cats, mut names) = (Vec::new(), Vec::new());
        let mut cells = Vec::new();
        for [cat, name, v] in rows {
            cells.push((index(&mut cats, cat), index(&mut names, name), num(v)?));
        }
        let mut series: Vec<(String, Vec<Option<f64>>)> = names
            .iter()
            .map(|n| (n.clone(), vec![None; cats.len()]))
            .collect();
        for (c, s, v) in cells {
            series[s].1[c] = Some(v);
        }
        grouped_bars(
            &o.out,
            &BarChart {
                title: &o.title,
                y_desc: &o.y_desc,
                categories: &cats,
                series: &series,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_png() {
        let dir = std::env::temp_dir().join(format!("dfbench-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.png");
        let cats = vec!["write".to_string(), "read".to_string()];
        let series = vec![
            (
                "redis-server".to_string(),
                vec![Some(100_000.0), Some(120_000.0)],
            ),
            ("damselfly".to_string(), vec![None, Some(150_000.0)]),
        ];
        grouped_bars(
            &p,
            &BarChart {
                title: "t",
                y_desc: "ops/sec",
                categories: &cats,
                series: &series,
            },
        )
        .unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn charts_from_tsv() {
        let dir = std::env::temp_dir().join(format!("dfbench-tsv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let input = dir.join("in.tsv");
        let out = dir.join("out.png");
        std::fs::write(
            &input,
            "# comment\nredis\t100000\t0.1\nredis\t50000\t0.05\nd\t90000\t0.2\n",
        )
        .unwrap();
        let mut o = ChartOpts {
            kind: "lines".into(),
            title: "t".into(),
            x_desc: "ops/sec".into(),
            y_desc: "p50 ms".into(),
            input: input.clone(),
            out: out.clone(),
        };
        run_chart(&o).unwrap();
        assert_eq!(&std::fs::read(&out).unwrap()[1..4], b"PNG");
        o.kind = "bars".into();
        run_chart(&o).unwrap();
        assert_eq!(&std::fs::read(&out).unwrap()[1..4], b"PNG");
        std::fs::write(&input, "a\tb\n").unwrap();
        assert!(run_chart(&o).unwrap_err().contains("3 tab-separated"));
        std::fs::write(&input, "a\tb\tx\n").unwrap();
        assert!(run_chart(&o).unwrap_err().contains("not a number"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
