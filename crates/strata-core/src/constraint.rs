//! The text form of a value constraint, as users type it (`sst > 28 and lat < 10`), parsed
//! into a [`Predicate`]. One grammar for every front end: Python, the CLI, later the server.
//!
//! ```text
//! expr   := term ("or" term)*            also || and |
//! term   := factor ("and" factor)*       also && and &
//! factor := "not" factor | "(" expr ")" | name op number | number op name
//! op     := <  <=  >  >=  ==  !=  =
//! name   := [A-Za-z_][A-Za-z0-9_.]*  |  "any text"  |  `any text`
//! number := a decimal or scientific literal, or inf / infinity, with an optional sign
//! ```
//!
//! `and` binds tighter than `or`. `not` is pushed down to the comparisons (De Morgan), each
//! replaced by its complement; invalid elements (NaN, fill values) satisfy no comparison,
//! so `not (x > 1)` is `x <= 1` and selects no invalid element, as SQL's NOT does.

use crate::decoding::Decoding;
use crate::error::{Error, Result};
use crate::manifest::Manifest;
use crate::query::{CmpOp, Predicate};

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Num(f64),
    Name(String),
    Op(CmpOp),
    And,
    Or,
    Not,
    Open,
    Close,
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Num(x) => format!("{x}"),
            Token::Name(n) => format!("'{n}'"),
            Token::Op(op) => format!("'{}'", op_text(*op)),
            Token::And => "'and'".into(),
            Token::Or => "'or'".into(),
            Token::Not => "'not'".into(),
            Token::Open => "'('".into(),
            Token::Close => "')'".into(),
        }
    }
}

fn op_text(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
        CmpOp::Eq => "==",
        CmpOp::Ne => "!=",
    }
}

/// Deeper nesting than this is refused rather than risking the stack.
const MAX_DEPTH: usize = 64;

/// Parses a constraint (see the module docs).
pub fn parse(text: &str) -> Result<Predicate> {
    if text.trim().is_empty() {
        return Err(Error::InvalidArgument("the constraint is empty".into()));
    }
    let tokens = tokenize(text)?;
    let mut p = Parser { text, tokens, pos: 0, depth: 0 };
    let tree = p.expr()?;
    if let Some(t) = p.tokens.get(p.pos) {
        return Err(p.error(format!("unexpected {}", t.describe())));
    }
    Ok(tree)
}

fn tokenize(text: &str) -> Result<Vec<Token>> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |at: usize, why: &str| {
        let rest: String = chars[at..].iter().collect();
        Error::InvalidArgument(format!("cannot parse constraint '{text}' at {:?}: {why}", rest.trim()))
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        let (token, len) = match two.as_str() {
            "<=" => (Token::Op(CmpOp::Le), 2),
            ">=" => (Token::Op(CmpOp::Ge), 2),
            "==" => (Token::Op(CmpOp::Eq), 2),
            "!=" => (Token::Op(CmpOp::Ne), 2),
            "&&" => (Token::And, 2),
            "||" => (Token::Or, 2),
            _ => match c {
                '<' => (Token::Op(CmpOp::Lt), 1),
                '>' => (Token::Op(CmpOp::Gt), 1),
                '=' => (Token::Op(CmpOp::Eq), 1),
                '&' => (Token::And, 1),
                '|' => (Token::Or, 1),
                '(' => (Token::Open, 1),
                ')' => (Token::Close, 1),
                '"' | '`' => {
                    let end = chars[i + 1..]
                        .iter()
                        .position(|&d| d == c)
                        .ok_or_else(|| err(i, "the quoted name is not closed"))?;
                    let name: String = chars[i + 1..i + 1 + end].iter().collect();
                    if name.is_empty() {
                        return Err(err(i, "an empty quoted name"));
                    }
                    (Token::Name(name), end + 2)
                }
                _ if c.is_ascii_digit() || c == '.' || c == '+' || c == '-' => {
                    let (x, len) = number(&chars[i..]).ok_or_else(|| err(i, "not a number"))?;
                    (Token::Num(x), len)
                }
                _ if c.is_ascii_alphabetic() || c == '_' => {
                    let len =
                        chars[i..].iter().take_while(|d| d.is_ascii_alphanumeric() || **d == '_' || **d == '.').count();
                    let word: String = chars[i..i + len].iter().collect();
                    let token = match word.to_ascii_lowercase().as_str() {
                        "and" => Token::And,
                        "or" => Token::Or,
                        "not" => Token::Not,
                        "inf" | "infinity" => Token::Num(f64::INFINITY),
                        "nan" => return Err(err(i, "NaN satisfies no comparison; compare with a number")),
                        _ => Token::Name(word),
                    };
                    (token, len)
                }
                _ => return Err(err(i, "unexpected character")),
            },
        };
        out.push(token);
        i += len;
    }
    Ok(out)
}

/// A number at the start of `s` (with its sign, `inf` and `infinity` included) and its
/// length, when the text there is one and is not followed by a name character.
fn number(s: &[char]) -> Option<(f64, usize)> {
    let mut i = 0;
    if matches!(s.first(), Some('+' | '-')) {
        i = 1;
    }
    let word_len = s[i..].iter().take_while(|c| c.is_ascii_alphabetic()).count();
    if word_len > 0 {
        let word: String = s[i..i + word_len].iter().collect::<String>().to_ascii_lowercase();
        if word != "inf" && word != "infinity" {
            return None;
        }
        i += word_len;
    } else {
        let digits = |s: &[char], from: usize| from + s[from..].iter().take_while(|c| c.is_ascii_digit()).count();
        let int_end = digits(s, i);
        let mut end = int_end;
        if s.get(end) == Some(&'.') {
            end = digits(s, end + 1);
        }
        if end == i || (end == i + 1 && s[i] == '.') {
            return None;
        }
        if matches!(s.get(end), Some('e' | 'E')) {
            let mut e = end + 1;
            if matches!(s.get(e), Some('+' | '-')) {
                e += 1;
            }
            let exp_end = digits(s, e);
            if exp_end > e {
                end = exp_end;
            }
        }
        i = end;
    }
    if s.get(i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.') {
        return None;
    }
    let text: String = s[..i].iter().collect();
    text.parse::<f64>().ok().map(|x| (x, i))
}

struct Parser<'a> {
    text: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, why: String) -> Error {
        Error::InvalidArgument(format!("constraint '{}': {why}", self.text))
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn take(&mut self) -> Result<Token> {
        let t = self.tokens.get(self.pos).cloned().ok_or_else(|| self.error("ends too early".into()))?;
        self.pos += 1;
        Ok(t)
    }

    fn expr(&mut self) -> Result<Predicate> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        let mut args = vec![self.term()?];
        while self.peek() == Some(&Token::Or) {
            self.pos += 1;
            args.push(self.term()?);
        }
        self.depth -= 1;
        Ok(if args.len() == 1 { args.remove(0) } else { Predicate::Or { args } })
    }

    fn term(&mut self) -> Result<Predicate> {
        let mut args = vec![self.factor()?];
        while self.peek() == Some(&Token::And) {
            self.pos += 1;
            args.push(self.factor()?);
        }
        Ok(if args.len() == 1 { args.remove(0) } else { Predicate::And { args } })
    }

    fn factor(&mut self) -> Result<Predicate> {
        match self.take()? {
            Token::Not => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err(self.error(format!("nested deeper than {MAX_DEPTH} levels")));
                }
                let inner = self.factor()?;
                self.depth -= 1;
                Ok(negate(inner))
            }
            Token::Open => {
                let inner = self.expr()?;
                match self.take() {
                    Ok(Token::Close) => Ok(inner),
                    _ => Err(self.error("missing ')'".into())),
                }
            }
            left => {
                let op = match self.take()? {
                    Token::Op(op) => op,
                    other => {
                        return Err(self.error(format!(
                            "expected a comparison after {}, got {}",
                            left.describe(),
                            other.describe()
                        )))
                    }
                };
                let right = self.take()?;
                match (left, right) {
                    (Token::Name(var), Token::Num(value)) => Ok(Predicate::Cmp { var, op, value }),
                    (Token::Num(value), Token::Name(var)) => Ok(Predicate::Cmp { var, op: op.flipped(), value }),
                    (l, r) => Err(self.error(format!(
                        "a comparison needs a variable on one side and a number on the other ({} {} {})",
                        l.describe(),
                        op_text(op),
                        r.describe()
                    ))),
                }
            }
        }
    }
}

impl std::fmt::Display for Predicate {
    /// The text form, which [`parse`] reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Predicate::Cmp { var, op, value } => {
                // Unquoted only when the tokenizer reads it back as this one name (not a
                // keyword, a number or several tokens).
                let plain = tokenize(var).is_ok_and(|t| t == [Token::Name(var.clone())]);
                if plain {
                    write!(f, "{var}")?;
                } else if var.contains('"') {
                    write!(f, "`{var}`")?;
                } else {
                    write!(f, "\"{var}\"")?;
                }
                write!(f, " {} {value:?}", op_text(*op))
            }
            Predicate::And { args } | Predicate::Or { args } => {
                let join = if matches!(self, Predicate::And { .. }) { " and " } else { " or " };
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(join)?;
                    }
                    match a {
                        Predicate::Cmp { .. } => write!(f, "{a}")?,
                        _ => write!(f, "({a})")?,
                    }
                }
                Ok(())
            }
        }
    }
}

/// The constraint on physical values rewritten on stored values (see [`crate::decoding`]):
/// a comparison on a packed variable (`scale_factor`, `add_offset`) compares the stored
/// values with the constant unpacked, and flips when the scale is negative; one on integers
/// read with the other sign (`_Unsigned`) is split where the reading changes. On a float32
/// variable stored as it reads, the constant is taken as a float32 (rounded to nearest), as
/// NumPy and xarray compare (NumPy 2's rules for Python numbers) and DuckDB too: `v == 0.97`
/// finds the elements that read 0.97, which a float64 comparison misses (0.97f32 is
/// 0.9700000286...).
pub fn on_stored_values(pred: &Predicate, manifest: &Manifest) -> Result<Predicate> {
    Ok(match pred {
        Predicate::Cmp { var, op, value } => {
            let decoding = Decoding::of(manifest, var)?;
            if decoding.is_identity() && manifest.variable(var)?.1.dtype == crate::DType::F32 {
                Predicate::Cmp { var: var.clone(), op: *op, value: *value as f32 as f64 }
            } else {
                decoding.on_stored(var, *op, *value)
            }
        }
        Predicate::And { args } => {
            Predicate::And { args: args.iter().map(|a| on_stored_values(a, manifest)).collect::<Result<_>>()? }
        }
        Predicate::Or { args } => {
            Predicate::Or { args: args.iter().map(|a| on_stored_values(a, manifest)).collect::<Result<_>>()? }
        }
    })
}

/// The complement of a comparison among valid values.
fn complement(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Ge,
        CmpOp::Le => CmpOp::Gt,
        CmpOp::Gt => CmpOp::Le,
        CmpOp::Ge => CmpOp::Lt,
        CmpOp::Eq => CmpOp::Ne,
        CmpOp::Ne => CmpOp::Eq,
    }
}

/// `not p`, pushed down to the comparisons.
pub fn negate(p: Predicate) -> Predicate {
    match p {
        Predicate::Cmp { var, op, value } => Predicate::Cmp { var, op: complement(op), value },
        Predicate::And { args } => Predicate::Or { args: args.into_iter().map(negate).collect() },
        Predicate::Or { args } => Predicate::And { args: args.into_iter().map(negate).collect() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(var: &str, op: CmpOp, value: f64) -> Predicate {
        Predicate::Cmp { var: var.into(), op, value }
    }

    #[test]
    fn comparisons_and_precedence() {
        assert_eq!(parse("sst > 28").unwrap(), cmp("sst", CmpOp::Gt, 28.0));
        assert_eq!(parse("25 < sst").unwrap(), cmp("sst", CmpOp::Gt, 25.0));
        assert_eq!(parse("t = -1.5e3").unwrap(), cmp("t", CmpOp::Eq, -1500.0));
        assert_eq!(parse("t<.5").unwrap(), cmp("t", CmpOp::Lt, 0.5));
        assert_eq!(parse("t > -inf").unwrap(), cmp("t", CmpOp::Gt, f64::NEG_INFINITY));
        let p = parse("a >= 1 and (b < 2 or a.b != 3) || c <= 4").unwrap();
        let expected = Predicate::Or {
            args: vec![
                Predicate::And {
                    args: vec![
                        cmp("a", CmpOp::Ge, 1.0),
                        Predicate::Or { args: vec![cmp("b", CmpOp::Lt, 2.0), cmp("a.b", CmpOp::Ne, 3.0)] },
                    ],
                },
                cmp("c", CmpOp::Le, 4.0),
            ],
        };
        assert_eq!(p, expected);
    }

    #[test]
    fn not_and_quoted_names() {
        assert_eq!(parse("not x > 1").unwrap(), cmp("x", CmpOp::Le, 1.0));
        assert_eq!(
            parse("NOT (x > 1 and \"sea ice\" == 0)").unwrap(),
            Predicate::Or { args: vec![cmp("x", CmpOp::Le, 1.0), cmp("sea ice", CmpOp::Ne, 0.0)] }
        );
        assert_eq!(parse("not not x < 2").unwrap(), cmp("x", CmpOp::Lt, 2.0));
        assert_eq!(parse("`T-2m` >= 273.15").unwrap(), cmp("T-2m", CmpOp::Ge, 273.15));
    }

    #[test]
    fn display_reads_back() {
        for text in ["a > 1 and (b < -2.5 or \"x y\" != 3)", "not (a >= inf or a < 0)", "`q\"` == 1e-30"] {
            let p = parse(text).unwrap();
            assert_eq!(parse(&p.to_string()).unwrap(), p, "{text} -> {p}");
        }
    }

    #[test]
    fn errors_are_invalid_arguments_that_say_where() {
        for bad in [
            "",
            "  ",
            "x >",
            "x > y",
            "1 < 2",
            "(x > 1",
            "x > 1)",
            "x > 1 and",
            "x 1",
            "x > 1e",
            "x > nan",
            "x > 1.2.3",
            "\"x > 1",
            "x > 1 x",
            "x >> 1",
            "x > 2abc",
            "x ! 1",
            "!x > 1",
        ] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{bad}: {e}");
        }
        let deep = format!("{}x > 1{}", "(".repeat(200), ")".repeat(200));
        assert!(parse(&deep).is_err());
        let nots = format!("{}x > 1", "not ".repeat(200));
        assert!(parse(&nots).is_err());
    }
}
