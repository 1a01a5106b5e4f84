//! Colour and width for text written to a terminal.
//!
//! Job: [`Paint`] styles a few things in the text views and the run summary (the hot path,
//! culprits, victims, headings, warnings) only when the stream is a terminal and the user
//! did not opt out (`NO_COLOR`, `CLICOLOR=0`, `TERM=dumb`; `CLICOLOR_FORCE` forces it:
//! anstream's rules); [`terminal_width`] is what text rows are cut to.
//!
//! Invariants: a disabled `Paint` returns its text unchanged, so files, pipes and tests
//! never see an escape sequence. Not async-signal-safe (allocates).

use anstream::{AutoStream, ColorChoice};
use anstyle::{AnsiColor, Style};
use std::io::IsTerminal;

/// Whether, and then how, to style text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Paint(bool);

impl Paint {
    /// No styling.
    pub fn none() -> Paint {
        Paint(false)
    }

    /// Styling if standard output is a terminal that wants colour.
    pub fn for_stdout() -> Paint {
        let out = std::io::stdout();
        Paint(out.is_terminal() && AutoStream::choice(&out) != ColorChoice::Never)
    }

    /// Styling if standard error is a terminal that wants colour.
    pub fn for_stderr() -> Paint {
        let err = std::io::stderr();
        Paint(err.is_terminal() && AutoStream::choice(&err) != ColorChoice::Never)
    }

    fn apply(self, style: Style, text: &str) -> String {
        if self.0 {
            format!("{style}{text}{style:#}")
        } else {
            text.to_owned()
        }
    }

    /// A heading or the hot path.
    pub fn bold(self, text: &str) -> String {
        self.apply(Style::new().bold(), text)
    }

    /// Code that made others wait.
    pub fn culprit(self, text: &str) -> String {
        self.apply(AnsiColor::Red.on_default().bold(), text)
    }

    /// Code that waited.
    pub fn victim(self, text: &str) -> String {
        self.apply(AnsiColor::Yellow.on_default(), text)
    }

    /// A warning's lead.
    pub fn warning(self, text: &str) -> String {
        self.apply(AnsiColor::Magenta.on_default().bold(), text)
    }
}

/// The width of the terminal standard output is, if it is one (`COLUMNS` first, as `ls`
/// and `git` honour it).
pub fn terminal_width() -> Option<usize> {
    let out = std::io::stdout();
    if !out.is_terminal() {
        return None;
    }
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .filter(|&c| c > 0);
    columns.or_else(|| terminal_size::terminal_size_of(&out).map(|(w, _)| usize::from(w.0)))
}

/// `text` cut to `width` characters, the cut marked with `…`.
pub fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_paint_leaves_text_alone_and_fit_cuts_with_a_mark() {
        assert_eq!(Paint::none().culprit("audit"), "audit");
        assert_eq!(Paint(true).bold("x"), "\u{1b}[1mx\u{1b}[0m");
        assert_eq!(fit("abcdef", 10), "abcdef");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("äöüß", 3), "äö…");
    }
}
