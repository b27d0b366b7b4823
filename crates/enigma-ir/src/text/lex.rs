//! The lexer: text to tokens (names, quoted names, typed numbers,
//! punctuation), with the trailing `// file:line` comments that carry source
//! locations.

use super::{ParseError, ParseErrorKind};
use crate::ir::SourceLoc;
use std::collections::HashMap;

const FLOAT_SUFFIXES: [&str; 3] = ["f16", "bf16", "f32"];

/// `inf_f32`, `nan_bf16`, …: identifiers the lexer reads as literals.
pub(super) fn is_special_float(s: &str) -> bool {
    let rest = s.strip_prefix("inf_").or_else(|| s.strip_prefix("nan_"));
    rest.is_some_and(|r| FLOAT_SUFFIXES.contains(&r))
}

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    /// A quoted name, unescaped.
    Quoted(String),
    /// A number with its sign and type suffix, `-3i32`, `0x7ff8…`, `inf_f32`.
    Number(String),
    Punct(&'static str),
    Eof,
}

impl Tok {
    pub(super) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) | Tok::Number(s) => format!("`{s}`"),
            Tok::Quoted(s) => format!("`{s:?}`"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Eof => "the end of the text".into(),
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) line: u32,
    pub(super) col: u32,
}

const PUNCTS: [&str; 33] = [
    "::", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "{", "}", "[", "]", "<", ">", ",", ":", "=", ".",
    ";", "+", "-", "*", "/", "%", "&", "|", "^", "!", "~", "$",
];

pub(super) struct Lexed {
    pub(super) toks: Vec<Token>,
    /// Trailing comments (text after `//`) by line.
    pub(super) comments: HashMap<u32, String>,
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Reads a string body after its opening quote; returns the text and the
/// index just past the closing quote.
fn unescape(chars: &[char], mut i: usize) -> Result<(String, usize), &'static str> {
    let mut out = String::new();
    loop {
        match chars.get(i) {
            None | Some('\n') => return Err("missing closing quote"),
            Some('"') => return Ok((out, i + 1)),
            Some('\\') => {
                let c = match chars.get(i + 1) {
                    Some('n') => '\n',
                    Some('r') => '\r',
                    Some('t') => '\t',
                    Some('0') => '\0',
                    Some('\\') => '\\',
                    Some('"') => '"',
                    Some('\'') => '\'',
                    Some('u') => {
                        if chars.get(i + 2) != Some(&'{') {
                            return Err("expected `{` after `\\u`");
                        }
                        let start = i + 3;
                        let mut end = start;
                        while chars.get(end).is_some_and(|c| c.is_ascii_hexdigit()) {
                            end += 1;
                        }
                        if chars.get(end) != Some(&'}') || end == start || end - start > 6 {
                            return Err("a `\\u{…}` escape takes 1 to 6 hex digits");
                        }
                        let hex: String = chars[start..end].iter().collect();
                        let c = u32::from_str_radix(&hex, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .ok_or("the `\\u{…}` escape is not a Unicode scalar value")?;
                        out.push(c);
                        i = end + 1;
                        continue;
                    }
                    _ => return Err("unknown escape"),
                };
                out.push(c);
                i += 2;
            }
            Some(&c) => {
                out.push(c);
                i += 1;
            }
        }
    }
}

pub(super) fn lex(src: &str) -> Result<Lexed, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let mut comments = HashMap::new();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    let mut last_token_line = 0u32;
    let err = |line, col, kind| ParseError { kernel: None, line, column: col, kind };
    while let Some(&c) = chars.get(i) {
        let start = i;
        if c == '\n' {
            line = line.saturating_add(1);
            col = 1;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            col = col.saturating_add(1);
            continue;
        }
        let next = chars.get(i + 1).copied();
        let after_dot = matches!(toks.last(), Some(Token { tok: Tok::Punct("."), .. }));
        let tok = if c == '/' && next == Some('/') {
            let mut end = i + 2;
            while chars.get(end).is_some_and(|&c| c != '\n') {
                end += 1;
            }
            if last_token_line == line {
                comments.insert(line, chars[i + 2..end].iter().collect());
            }
            col = col.saturating_add((end - i) as u32);
            i = end;
            continue;
        } else if c == '"' {
            let (s, end) = unescape(&chars, i + 1).map_err(|reason| err(line, col, ParseErrorKind::InvalidString { reason }))?;
            i = end;
            Tok::Quoted(s)
        } else if c.is_ascii_alphabetic() || c == '_' {
            while chars.get(i).copied().is_some_and(is_ident_char) {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            if is_special_float(&s) {
                Tok::Number(s)
            } else {
                Tok::Ident(s)
            }
        } else if c.is_ascii_digit() || (c == '-' && next.is_some_and(|n| n.is_ascii_digit()) && !after_dot) {
            i = lex_number(&chars, i, after_dot);
            Tok::Number(chars[start..i].iter().collect())
        } else if let Some(end) = negative_infinity_end(&chars, i) {
            i = end;
            Tok::Number(chars[start..i].iter().collect())
        } else if let Some(&p) = PUNCTS.iter().find(|p| {
            let mut pc = p.chars();
            pc.next() == Some(c) && pc.next().is_none_or(|p2| Some(p2) == next)
        }) {
            i += p.len();
            Tok::Punct(p)
        } else {
            return Err(err(line, col, ParseErrorKind::UnexpectedCharacter { ch: c }));
        };
        toks.push(Token { tok, line, col });
        last_token_line = line;
        col = col.saturating_add((i - start) as u32);
    }
    toks.push(Token { tok: Tok::Eof, line, col });
    Ok(Lexed { toks, comments })
}

/// `-inf_f32` is one token: the end of it when it starts at `i`.
fn negative_infinity_end(chars: &[char], i: usize) -> Option<usize> {
    if chars.get(i) != Some(&'-') {
        return None;
    }
    let mut end = i + 1;
    while chars.get(end).copied().is_some_and(is_ident_char) {
        end += 1;
    }
    let word: String = chars[i + 1..end].iter().collect();
    (word.starts_with("inf_") && is_special_float(&word)).then_some(end)
}

/// Scans a number: `-`? digits (`.` digits)? (`e` sign? digits)? suffix?, or
/// `0x` hex digits. After a `.` only digits (`v.4`).
fn lex_number(chars: &[char], mut i: usize, after_dot: bool) -> usize {
    let digit = |i: usize| chars.get(i).is_some_and(|c| c.is_ascii_digit());
    if chars.get(i) == Some(&'-') {
        i += 1;
    }
    if !after_dot && chars.get(i) == Some(&'0') && matches!(chars.get(i + 1), Some('x' | 'X')) {
        i += 2;
        while chars.get(i).is_some_and(|c| c.is_ascii_hexdigit()) {
            i += 1;
        }
        return i;
    }
    while digit(i) {
        i += 1;
    }
    if after_dot {
        return i;
    }
    if chars.get(i) == Some(&'.') && digit(i + 1) {
        i += 1;
        while digit(i) {
            i += 1;
        }
    }
    if matches!(chars.get(i), Some('e' | 'E')) {
        let mut j = i + 1;
        if matches!(chars.get(j), Some('+' | '-')) {
            j += 1;
        }
        if digit(j) {
            i = j;
            while digit(i) {
                i += 1;
            }
        }
    }
    while chars.get(i).copied().is_some_and(is_ident_char) {
        i += 1;
    }
    i
}

/// Parses `file:line` (or `"file":line`) from a trailing comment.
pub(super) fn parse_loc(comment: &str) -> Option<SourceLoc> {
    let t = comment.trim();
    let digits = |s: &str| -> Option<u32> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    if t.starts_with('"') {
        let chars: Vec<char> = t.chars().collect();
        let (file, end) = unescape(&chars, 1).ok()?;
        let rest: String = chars[end..].iter().collect();
        let line = digits(rest.strip_prefix(':')?)?;
        return Some(SourceLoc { file, line });
    }
    let (file, line) = t.rsplit_once(':')?;
    Some(SourceLoc { file: file.to_string(), line: digits(line)? })
}
