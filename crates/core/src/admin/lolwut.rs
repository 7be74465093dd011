//! LOLWUT [VERSION v] [args...] (Redis 7.0's `lolwut.c`): Georg Nees's "Schotter" in braille
//! (version 5), an 8-bit skyline in terminal colours (version 6), else the version line alone
//! (7.0's default). The art is random, as Redis's.

use crate::commands::util::*;
use crate::commands::ConnCtx;
use damselfly_types::rand::Rng;

const VERSION: &str = crate::version::REDIS_VERSION;

/// A bitmap of small colour numbers (`lwCanvas`).
struct Canvas {
    w: i32,
    h: i32,
    px: Vec<u8>,
}

impl Canvas {
    fn new(w: i32, h: i32, bg: u8) -> Canvas {
        Canvas {
            w,
            h,
            px: vec![bg; (w as usize) * (h as usize)],
        }
    }

    fn set(&mut self, x: i32, y: i32, c: u8) {
        if x >= 0 && x < self.w && y >= 0 && y < self.h {
            self.px[(x + y * self.w) as usize] = c;
        }
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        if x >= 0 && x < self.w && y >= 0 && y < self.h {
            self.px[(x + y * self.w) as usize]
        } else {
            0
        }
    }

    /// Bresenham, as `lwDrawLine`.
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32, c: u8) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let (sx, sy) = (if x1 < x2 { 1 } else { -1 }, if y1 < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x1, y1, c);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square centred at (x, y), rotated by `angle` (`lwDrawSquare`).
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32, c: u8) {
        let size = (size / std::f32::consts::SQRT_2).round();
        let mut k = std::f32::consts::FRAC_PI_4 + angle;
        let mut p = [(0i32, 0i32); 4];
        for pt in p.iter_mut() {
            *pt = (
                (k.sin() * size + x as f32).round() as i32,
                (k.cos() * size + y as f32).round() as i32,
            );
            k += std::f32::consts::FRAC_PI_2;
        }
        for j in 0..4 {
            let (a, b) = (p[j], p[(j + 1) % 4]);
            self.line(a.0, a.1, b.0, b.1, c);
        }
    }
}

/// `getLongFromObjectOrReply` for the optional numeric arguments, clamped as Redis clamps.
fn arg(cx: &mut ConnCtx, args: &[&[u8]], i: usize, default: i64, lo: i64, hi: i64) -> Option<i64> {
    match args.get(i) {
        None => Some(default),
        Some(a) => match parse_i64(a) {
            Some(v) => Some(v.clamp(lo, hi)),
            None => {
                cx.reply.error(ERR_NOT_INT);
                None
            }
        },
    }
}

fn rand_unit(rng: &mut Rng) -> f32 {
    (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32
}

/// Version 5: Schotter (`lwDrawSchotter`), rendered as braille, 2x4 pixels a character.
fn lolwut5(cx: &mut ConnCtx, args: &[&[u8]]) {
    let Some(cols) = arg(cx, args, 0, 66, 1, 1000) else {
        return;
    };
    let Some(per_row) = arg(cx, args, 1, 8, 1, 200) else {
        return;
    };
    let Some(per_col) = arg(cx, args, 2, 12, 1, 200) else {
        return;
    };
    let mut rng = Rng::from_entropy();
    let width = (cols * 2) as i32;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32) as i32 + padding * 2;
    let mut c = Canvas::new(width, height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0) as i32 + padding;
            let mut sy = (y as f32 * side + side / 2.0) as i32 + padding;
            let mut angle = 0.0;
            if y > 1 {
                let mut r = [0f32; 3];
                for v in r.iter_mut() {
                    *v = rand_unit(&mut rng) / per_col as f32 * y as f32;
                }
                for v in r.iter_mut() {
                    if rng.below(2) == 1 {
                        *v = -*v;
                    }
                }
                angle = r[0];
                sx += (r[1] * side / 3.0) as i32;
                sy += (r[2] * side / 3.0) as i32;
            }
            c.square(sx, sy, side, angle, 1);
        }
    }
    let mut text = String::new();
    let mut y = 0;
    while y < c.h {
        let mut x = 0;
        while x < c.w {
            let bits = [
                (x, y),
                (x, y + 1),
                (x, y + 2),
                (x + 1, y),
                (x + 1, y + 1),
                (x + 1, y + 2),
                (x, y + 3),
                (x + 1, y + 3),
            ];
            let byte = bits.iter().enumerate().fold(0u32, |b, (i, &(px, py))| {
                b | ((c.get(px, py) != 0) as u32) << i
            });
            text.push(char::from_u32(0x2800 + byte).unwrap_or(' '));
            x += 2;
        }
        if y != c.h - 1 {
            text.push('\n');
        }
        y += 4;
    }
    text.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
    text.push_str(VERSION);
    text.push('\n');
    cx.reply.verbatim("txt", text.as_bytes());
}

/// Version 6: a skyline (`generateSkyline`), rendered with terminal colour escapes.
fn lolwut6(cx: &mut ConnCtx, args: &[&[u8]]) {
    let Some(cols) = arg(cx, args, 0, 80, 1, 1000) else {
        return;
    };
    let Some(rows) = arg(cx, args, 1, 20, 1, 1000) else {
        return;
    };
    let mut rng = Rng::from_entropy();
    let mut c = Canvas::new(cols as i32, rows as i32, 3);
    let mut rnd = |n: i32| rng.below(n.max(1) as u64) as i32;
    let building = |c: &mut Canvas,
                    xoff: i32,
                    w: i32,
                    h: i32,
                    windows: bool,
                    color: u8,
                    rnd: &mut dyn FnMut(i32) -> i32| {
        let starty = c.h - 1;
        let endy = starty - h + 1;
        let mut y = starty;
        while y >= endy {
            for x in xoff..xoff + w {
                if y == endy && (x <= xoff + 1 || x >= xoff + w - 2) {
                    continue;
                }
                let mut col = color;
                if windows && x > xoff + 1 && x < xoff + w - 2 && y > endy + 1 && y < starty - 1 {
                    let relx = x - (xoff + 1);
                    let rely = y - (endy + 1);
                    if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                        loop {
                            col = 1 + rnd(2) as u8;
                            if col != color {
                                break;
                            }
                        }
                        if relx % 2 != 0 {
                            col = c.get(x - 1, y);
                        }
                    }
                }
                c.set(x, y, col);
            }
            y -= 1;
        }
    };
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < c.w {
            offset += rnd(8);
            let w = 10 + rnd(9);
            let h = if color == 2 {
                c.h / 2 + rnd(c.h) / 2
            } else {
                c.h / 2 + rnd(c.h) / 3
            };
            building(&mut c, offset, w, h, false, color, &mut rnd);
            offset += if color == 2 { w / 2 } else { w + 1 };
        }
    }
    let mut offset = -10;
    while offset < c.w {
        offset += rnd(8);
        let mut w = 5 + rnd(14);
        if w % 4 != 0 {
            w += w % 3;
        }
        let h = c.h / 3 + rnd(c.h) / 2;
        building(&mut c, offset, w, h, true, 0, &mut rnd);
        offset += w + 5;
    }
    let mut text = String::new();
    for y in 0..c.h {
        for x in 0..c.w {
            let ce = match c.get(x, y) {
                1 => "0;90;100m",
                2 => "0;37;47m",
                3 => "0;97;107m",
                _ => "0;30;40m",
            };
            text.push_str("\x1b[");
            text.push_str(ce);
            text.push_str(" \x1b[0m");
        }
        if y != c.h - 1 {
            text.push('\n');
        }
    }
    text.push_str("\nDedicated to the 8 bit game developers of past and present.\nOriginal 8 bit image from Plaguemon by hikikomori. Redis ver. ");
    text.push_str(VERSION);
    text.push('\n');
    cx.reply.verbatim("txt", text.as_bytes());
}

pub fn lolwut(cx: &mut ConnCtx, args: &[&[u8]]) {
    let mut ver: Option<i64> = None;
    let mut rest = &args[1..];
    if args.len() >= 3 && eq_ic(args[1], "version") {
        match parse_i64(args[2]) {
            Some(v) => ver = Some(v),
            None => {
                cx.reply.error(ERR_NOT_INT);
                return;
            }
        }
        rest = &args[3..];
    }
    // Redis formats the version as "%u.0.0" (an unsigned int) and looks at its first digits.
    let v = match ver {
        Some(v) => format!("{}.0.0", v as u32),
        None => VERSION.to_string(),
    };
    let b = v.as_bytes();
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    if (at(0) == b'5' && at(1) == b'.' && at(2) != b'9')
        || (at(0) == b'4' && at(1) == b'.' && at(2) == b'9')
    {
        lolwut5(cx, rest);
    } else if (at(0) == b'6' && at(1) == b'.' && at(2) != b'9')
        || (at(0) == b'5' && at(1) == b'.' && at(2) == b'9')
    {
        lolwut6(cx, rest);
    } else {
        cx.reply
            .verbatim("txt", format!("Redis ver. {VERSION}\n").as_bytes());
    }
}
