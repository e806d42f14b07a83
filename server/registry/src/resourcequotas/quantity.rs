//! `resource.Quantity` as quota needs it: parsed from its text, added, subtracted, compared, and
//! printed in Kubernetes' canonical form, because quota messages and `status.used` show what Go's
//! `Quantity.String()` shows (`2000` is `2k`, `1.5` is `1500m`, `1536Mi` stays binary).
//!
//! Values are held exactly in nano units (Go rounds anything finer up to `1n`); the notation
//! (decimal SI, binary SI, decimal exponent) is kept to print results the way Go does: a sum has
//! the notation of its left operand unless that was zero.

use std::cmp::Ordering;
use std::fmt;

/// Nano units per unit.
const NANOS: i128 = 1_000_000_000;

/// How a quantity was written, which decides how it is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Notation {
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

/// A quantity, exact to the nano unit.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    nanos: i128,
    notation: Notation,
}

/// A text that is not a quantity (or one too large to hold).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantityError;

impl fmt::Display for QuantityError {
    /// Go's `resource.ErrFormatWrong`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    }
}

impl std::error::Error for QuantityError {}

impl Quantity {
    /// Zero, printed `0`.
    pub const ZERO: Quantity = Quantity {
        nanos: 0,
        notation: Notation::DecimalSi,
    };

    /// A whole number of units in decimal notation (object counts).
    pub fn from_units(units: i64) -> Quantity {
        Quantity {
            nanos: i128::from(units) * NANOS,
            notation: Notation::DecimalSi,
        }
    }

    /// Parses Kubernetes' quantity syntax: a signed decimal number and a suffix (`m`, `k`, `Mi`,
    /// `e3`, ...).
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        let (negative, rest) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_end);
        let (mantissa, fraction_digits) = parse_decimal(number)?;
        let (notation, base10, base1024) = parse_suffix(suffix)?;
        // value = mantissa * 10^(base10 - fraction_digits) * 1024^base1024, in nanos.
        let mut nanos = mantissa;
        for _ in 0..base1024 {
            nanos = nanos.checked_mul(1024).ok_or(QuantityError)?;
        }
        let exponent = base10 + 9 - fraction_digits;
        if exponent >= 0 {
            let factor = 10i128.checked_pow(exponent as u32).ok_or(QuantityError)?;
            nanos = nanos.checked_mul(factor).ok_or(QuantityError)?;
        } else {
            // Finer than a nano unit: rounded up, as Go does.
            let divisor = 10i128
                .checked_pow(exponent.unsigned_abs())
                .unwrap_or(i128::MAX);
            let whole = nanos / divisor;
            nanos = if nanos % divisor == 0 {
                whole
            } else {
                whole + 1
            };
        }
        Ok(Quantity {
            nanos: if negative { -nanos } else { nanos },
            notation,
        })
    }

    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// Whether the value is a whole number of units.
    pub fn is_integer(&self) -> bool {
        self.nanos % NANOS == 0
    }

    /// The sum, in this quantity's notation (the other's when this is zero), as Go's `Add`.
    pub fn add(&self, other: &Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(other.nanos),
            notation: self.notation_with(other),
        }
    }

    /// The difference, in this quantity's notation (the other's when this is zero).
    pub fn sub(&self, other: &Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_sub(other.nanos),
            notation: self.notation_with(other),
        }
    }

    /// Go keeps the left operand's notation unless it is zero.
    fn notation_with(&self, other: &Quantity) -> Notation {
        if self.is_zero() {
            other.notation
        } else {
            self.notation
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Quantity) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Quantity) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Quantity) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl fmt::Display for Quantity {
    /// Go's canonical form: the largest suffix that keeps the number whole.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        if self.notation == Notation::BinarySi
            && self.is_integer()
            && self.nanos.unsigned_abs() >= 1024 * NANOS.unsigned_abs()
        {
            let mut units = self.nanos / NANOS;
            let mut power = 0;
            while power < BINARY_SUFFIXES.len() - 1 && units % 1024 == 0 {
                units /= 1024;
                power += 1;
            }
            return write!(f, "{units}{}", BINARY_SUFFIXES[power]);
        }
        // The largest exponent (a multiple of 3, from -9) whose mantissa is whole.
        let mut mantissa = self.nanos;
        let mut exponent = -9;
        while exponent < 18 && mantissa % 1000 == 0 {
            mantissa /= 1000;
            exponent += 3;
        }
        match self.notation {
            Notation::DecimalExponent if exponent == 0 => write!(f, "{mantissa}"),
            Notation::DecimalExponent => write!(f, "{mantissa}e{exponent}"),
            _ => write!(f, "{mantissa}{}", decimal_suffix(exponent)),
        }
    }
}

const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

fn decimal_suffix(exponent: i32) -> &'static str {
    match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => "",
    }
}

/// `123.45` as (12345, 2): the digits and how many of them follow the point.
fn parse_decimal(number: &str) -> Result<(i128, i32), QuantityError> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return Err(QuantityError);
    }
    let mut mantissa: i128 = 0;
    for digit in whole.bytes().chain(fraction.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(digit - b'0')))
            .ok_or(QuantityError)?;
    }
    Ok((mantissa, fraction.len() as i32))
}

/// The notation, power of ten and power of 1024 a suffix stands for.
fn parse_suffix(suffix: &str) -> Result<(Notation, i32, u32), QuantityError> {
    let decimal = |exponent| Ok((Notation::DecimalSi, exponent, 0));
    let binary = |power| Ok((Notation::BinarySi, 0, power));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        _ => {
            let exponent = suffix
                .strip_prefix(['e', 'E'])
                .filter(|e| !e.is_empty())
                .ok_or(QuantityError)?;
            let digits = exponent.trim_start_matches(['+', '-']);
            if digits.is_empty()
                || !digits.bytes().all(|b| b.is_ascii_digit())
                || exponent.len() - digits.len() > 1
            {
                return Err(QuantityError);
            }
            let exponent: i32 = exponent.parse().map_err(|_| QuantityError)?;
            if exponent.abs() > 60 {
                return Err(QuantityError);
            }
            Ok((Notation::DecimalExponent, exponent, 0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> String {
        Quantity::parse(text).unwrap().to_string()
    }

    #[test]
    fn prints_like_go() {
        for (text, printed) in [
            ("0", "0"),
            ("1", "1"),
            ("2000", "2k"),
            ("1200", "1200"),
            ("1.5", "1500m"),
            ("0.5", "500m"),
            ("100m", "100m"),
            ("1000m", "1"),
            ("1Gi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("1.5Gi", "1536Mi"),
            ("1024", "1024"),
            ("512Ki", "512Ki"),
            ("0.5Ki", "512"),
            ("1e3", "1e3"),
            ("1E3", "1e3"),
            ("1.5e3", "1500"),
            ("0.0000000001", "1n"),
            ("-1", "-1"),
            ("+5", "5"),
            ("12M", "12M"),
        ] {
            assert_eq!(canonical(text), printed, "{text}");
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        for text in [
            "", "abc", "1.2.3", "1Zi", "1e", "1e+-3", ".", "--1", "1 ", "m",
        ] {
            assert!(Quantity::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn arithmetic_keeps_the_left_notation() {
        let one_gi = Quantity::parse("1Gi").unwrap();
        let half = Quantity::parse("512Mi").unwrap();
        assert_eq!(one_gi.add(&half).to_string(), "1536Mi");
        assert_eq!(Quantity::ZERO.add(&one_gi).to_string(), "1Gi");
        assert_eq!(one_gi.sub(&half).to_string(), "512Mi");
        let cpu = Quantity::parse("500m").unwrap();
        assert_eq!(cpu.add(&cpu).to_string(), "1");
        assert!(Quantity::parse("1").unwrap() == Quantity::parse("1000m").unwrap());
        assert!(Quantity::parse("2").unwrap() > Quantity::parse("1500m").unwrap());
        assert!(Quantity::parse("-1").unwrap().is_negative());
        assert!(!Quantity::parse("1500m").unwrap().is_integer());
    }
}
