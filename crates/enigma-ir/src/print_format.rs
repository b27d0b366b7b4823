//! The format strings of `print` statements ([`crate::StmtKind::Print`]):
//! printable ASCII with `{}` where each value goes, `{{` and `}}` for
//! literal braces. [`pieces`] is the one parser; validation, the simulator
//! and the code writers all read a format through it.

use thiserror::Error;

/// One part of a format string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Text printed as it is (braces unescaped).
    Text(String),
    /// The next value.
    Value,
}

/// Why a format string is not one.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum FormatError {
    #[error("character {ch:?} at byte {offset} is not printable ASCII (a format is one line of printable ASCII)")]
    NotPrintable { offset: usize, ch: char },
    #[error("`{brace}` at byte {offset} is neither `{{}}`, `{{{{` nor `}}}}` (write `{{{{` or `}}}}` for a brace)")]
    LoneBrace { offset: usize, brace: char },
}

/// The pieces of `format`, or why it is not a format.
pub fn pieces(format: &str) -> Result<Vec<Piece>, FormatError> {
    let mut out = vec![];
    let mut text = String::new();
    let mut chars = format.char_indices().peekable();
    while let Some((offset, ch)) = chars.next() {
        if !(' '..='~').contains(&ch) {
            return Err(FormatError::NotPrintable { offset, ch });
        }
        match ch {
            '{' if chars.peek().map(|&(_, c)| c) == Some('}') => {
                chars.next();
                if !text.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut text)));
                }
                out.push(Piece::Value);
            }
            '{' | '}' if chars.peek().map(|&(_, c)| c) == Some(ch) => {
                chars.next();
                text.push(ch);
            }
            '{' | '}' => return Err(FormatError::LoneBrace { offset, brace: ch }),
            _ => text.push(ch),
        }
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

/// How many values `format` takes (0 when it is not a format).
pub fn placeholders(format: &str) -> usize {
    pieces(format).map_or(0, |p| p.iter().filter(|p| **p == Piece::Value).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_escapes_and_errors() {
        assert_eq!(
            pieces("x = {}, {{y}} {}").unwrap(),
            vec![Piece::Text("x = ".into()), Piece::Value, Piece::Text(", {y} ".into()), Piece::Value]
        );
        assert_eq!(placeholders("{}{}{}"), 3);
        assert_eq!(pieces("a}b"), Err(FormatError::LoneBrace { offset: 1, brace: '}' }));
        assert_eq!(pieces("{x}"), Err(FormatError::LoneBrace { offset: 0, brace: '{' }));
        assert_eq!(pieces("tab\there"), Err(FormatError::NotPrintable { offset: 3, ch: '\t' }));
        assert_eq!(pieces("").unwrap(), vec![]);
    }
}
