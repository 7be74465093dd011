//! PNG charts (grouped bar charts) drawn with plotters' bitmap backend.
//!
//! Text needs a TrueType font: the first of `DAMSELFLY_BENCH_FONT` and a list of
//! common system paths (Debian `fonts-dejavu-core` provides DejaVuSans.ttf) is
//! registered with plotters. Without any font the charts are drawn without text.

use std::path::Path;
use std::sync::OnceLock;

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
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .margin(16)
        .x_label_area_size(if text { 56 } else { 8 })
        .y_label_area_size(if text { 80 } else { 8 });
    if text {
        builder.caption(c.title, ("sans-serif", 22));
    }
    let mut chart = builder
        .build_cartesian_2d(0f64..ncat as f64, 0f64..ymax)
        .map_err(|x| e(&x))?;
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
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
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
}
