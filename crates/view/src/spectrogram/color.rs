//! The colour scale: count per cell per interval to a colour (or a glyph without colour).
//!
//! black (nothing), 7 greens for 1..99, 3 yellows for 100..999, 4 reds from 1000 up: the
//! scale of sysdig's chisel, but on the count of the cell in its interval (not a rate) and with
//! fixed, documented thresholds, so that a count can be read back from a colour.

/// How cells are coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Palette {
    /// xterm 256-colour palette (works over ssh and in tmux/screen).
    Ansi256,
    /// 24-bit colour, a continuous gradient (terminals that set `COLORTERM=truecolor`).
    TrueColor,
    /// No colour: glyphs of increasing density (` .:o#@`).
    Mono,
}

impl Palette {
    /// The palette asked for with `--colors` (`auto`, `256`, `truecolor`, `none`): `auto` is none
    /// for plain rows, else what the terminal supports.
    pub fn choose(colors: &str, plain: bool) -> Palette {
        match colors {
            "none" => Palette::Mono,
            "256" => Palette::Ansi256,
            "truecolor" => Palette::TrueColor,
            _ if plain => Palette::Mono,
            _ => Palette::detect(),
        }
    }

    /// The palette a terminal supports, from `COLORTERM` and `TERM` (`NO_COLOR` turns colour off).
    pub fn detect() -> Palette {
        if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            return Palette::Mono;
        }
        let ct = std::env::var("COLORTERM").unwrap_or_default().to_ascii_lowercase();
        if ct == "truecolor" || ct == "24bit" {
            return Palette::TrueColor;
        }
        match std::env::var("TERM").as_deref() {
            Ok("dumb") => Palette::Mono,
            _ => Palette::Ansi256,
        }
    }
}

/// A terminal colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Color {
    /// xterm-256 palette index.
    Idx(u8),
    /// 24-bit colour.
    Rgb(u8, u8, u8),
}

impl Color {
    /// The RGB value (palette indices are resolved with the xterm table).
    pub fn rgb(self) -> (u8, u8, u8) {
        match self {
            Color::Rgb(r, g, b) => (r, g, b),
            Color::Idx(i) => xterm_rgb(i),
        }
    }
}

/// RGB of an xterm-256 palette entry.
pub fn xterm_rgb(i: u8) -> (u8, u8, u8) {
    const BASE: [(u8, u8, u8); 16] = [
        (0, 0, 0),
        (205, 0, 0),
        (0, 205, 0),
        (205, 205, 0),
        (0, 0, 238),
        (205, 0, 205),
        (0, 205, 205),
        (229, 229, 229),
        (127, 127, 127),
        (255, 0, 0),
        (0, 255, 0),
        (255, 255, 0),
        (92, 92, 255),
        (255, 0, 255),
        (0, 255, 255),
        (255, 255, 255),
    ];
    match i {
        0..=15 => BASE[i as usize],
        16..=231 => {
            let v = i - 16;
            let lvl = |x: u8| if x == 0 { 0 } else { 55 + 40 * x };
            (lvl(v / 36), lvl(v / 6 % 6), lvl(v % 6))
        }
        _ => {
            let g = 8 + 10 * (i - 232);
            (g, g, g)
        }
    }
}

/// The broad class of a count, as the legend names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Heat {
    /// No event.
    None,
    /// 1 to 99.
    Green,
    /// 100 to 999.
    Yellow,
    /// 1000 or more.
    Red,
}

impl Heat {
    /// The class of a count.
    pub fn of(n: u64) -> Heat {
        match n {
            0 => Heat::None,
            1..=99 => Heat::Green,
            100..=999 => Heat::Yellow,
            _ => Heat::Red,
        }
    }
}

/// Lower bounds of the 256-colour steps and their palette entries.
pub const STEPS_256: [(u64, u8); 14] = [
    (1, 22),
    (2, 28),
    (4, 34),
    (8, 40),
    (16, 46),
    (32, 82),
    (64, 118),
    (100, 226),
    (200, 220),
    (500, 214),
    (1_000, 202),
    (3_000, 196),
    (10_000, 197),
    (100_000, 199),
];

/// Background of an empty cell (black).
pub const EMPTY_256: u8 = 16;

/// The class of a 256-colour palette entry used by the scale (to read colours back).
pub fn heat_of_256(idx: u8) -> Option<Heat> {
    if idx == EMPTY_256 {
        return Some(Heat::None);
    }
    STEPS_256.iter().find(|(_, c)| *c == idx).map(|(lo, _)| Heat::of(*lo))
}

/// The lowest count drawn with a 256-colour palette entry (to read counts back).
pub fn min_count_of_256(idx: u8) -> Option<u64> {
    STEPS_256.iter().find(|(_, c)| *c == idx).map(|(lo, _)| *lo)
}

/// Glyphs of the no-colour mode and the count each starts at.
pub const GLYPHS: [(u64, char); 5] = [(1, '.'), (10, ':'), (100, 'o'), (1_000, '#'), (10_000, '@')];

/// The glyph of a count in the no-colour mode (space for none).
pub fn glyph(n: u64) -> char {
    GLYPHS.iter().rev().find(|(lo, _)| n >= *lo).map_or(' ', |(_, g)| *g)
}

/// The class of a glyph (to read plain rows back).
pub fn heat_of_glyph(c: char) -> Option<Heat> {
    if c == ' ' {
        return Some(Heat::None);
    }
    GLYPHS.iter().find(|(_, g)| *g == c).map(|(lo, _)| Heat::of(*lo))
}

/// The colour of a count (`None`: empty).
pub fn color(n: u64, p: Palette) -> Option<Color> {
    if n == 0 {
        return None;
    }
    match p {
        Palette::Mono => None,
        Palette::Ansi256 => STEPS_256.iter().rev().find(|(lo, _)| n >= *lo).map(|(_, c)| Color::Idx(*c)),
        Palette::TrueColor => {
            let t = (n as f64).log10();
            let (r, g, b) = if t < 2.0 {
                // dark to bright green
                (0.0, 80.0 + 175.0 * t / 2.0, 0.0)
            } else if t < 3.0 {
                // yellow to amber
                (255.0, 255.0 - 80.0 * (t - 2.0), 0.0)
            } else {
                // orange-red to red to hot pink
                let u = ((t - 3.0) / 2.0).min(1.0);
                (255.0, 100.0 * (1.0 - u), 150.0 * u * u)
            };
            Some(Color::Rgb(r as u8, g as u8, b as u8))
        }
    }
}

/// The background of an empty cell in a colour palette (black), `None` in mono.
pub fn empty_color(p: Palette) -> Option<Color> {
    match p {
        Palette::Mono => None,
        Palette::Ansi256 => Some(Color::Idx(EMPTY_256)),
        Palette::TrueColor => Some(Color::Rgb(0, 0, 0)),
    }
}

/// Legend entries: `(label, count drawn as the swatch)`.
pub fn legend_steps(p: Palette) -> Vec<(String, u64)> {
    match p {
        Palette::Mono => GLYPHS.iter().map(|(lo, _)| (crate::text::short_count(*lo as f64), *lo)).collect(),
        _ => [1u64, 10, 100, 1_000, 10_000, 100_000].iter().map(|&n| (crate::text::short_count(n as f64), n)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_steps() {
        assert_eq!(Heat::of(0), Heat::None);
        assert_eq!(Heat::of(99), Heat::Green);
        assert_eq!(Heat::of(100), Heat::Yellow);
        assert_eq!(Heat::of(1_000), Heat::Red);
        assert_eq!(color(1, Palette::Ansi256), Some(Color::Idx(22)));
        assert_eq!(color(99, Palette::Ansi256), Some(Color::Idx(118)));
        assert_eq!(color(150, Palette::Ansi256), Some(Color::Idx(226)));
        assert_eq!(color(5_000, Palette::Ansi256), Some(Color::Idx(196)));
        for n in [1u64, 7, 64, 99, 100, 999, 1000, 12_345, 1 << 30] {
            let Some(Color::Idx(i)) = color(n, Palette::Ansi256) else { panic!() };
            assert_eq!(heat_of_256(i), Some(Heat::of(n)), "{n}");
            assert!(min_count_of_256(i).unwrap() <= n);
            assert_eq!(heat_of_glyph(glyph(n)), Some(Heat::of(n)), "{n}");
        }
        assert_eq!(glyph(0), ' ');
        assert_eq!(color(0, Palette::TrueColor), None);
        assert_eq!(xterm_rgb(46), (0, 255, 0));
        assert_eq!(xterm_rgb(196), (255, 0, 0));
        assert_eq!(xterm_rgb(16), (0, 0, 0));
    }

    #[test]
    fn truecolor_gradient_is_ordered() {
        // Greens grow brighter, then yellow, then red.
        let g = |n| color(n, Palette::TrueColor).unwrap().rgb();
        assert!(g(1).1 < g(50).1 && g(1).0 == 0);
        assert_eq!(g(100).0, 255);
        assert!(g(100).1 > 200 && g(5_000).1 < 100);
    }
}
