//! Order-preserving key encoding.
//!
//! Every elastree index orders keys as byte strings compared lexicographically (`memcmp`
//! order, a proper prefix first). This module turns typed values into bytes whose order is
//! the natural order of the values:
//!
//! | type | bytes | width |
//! |---|---|---|
//! | `u64` | big-endian | 8 |
//! | `i64` | sign bit flipped, then big-endian | 8 |
//! | `f64` | IEEE 754 bits, all flipped if the sign is set, else only the sign; big-endian | 8 |
//! | bytes, str (single format) | the bytes themselves, raw | len |
//! | bytes, str (tuple format) | each `0x00` written as `0x00 0xFF`, then `0x00 0x00` | len + zeros + 2 |
//!
//! There are two formats, and they differ only for bytes and strings:
//!
//! * **Single format** — one value is the whole key: [`encode_single`] / [`decode_single`],
//!   and [`encode_u64`], [`encode_i64`], [`encode_f64`] with their decoders. Bytes and
//!   strings are stored raw, so a standalone string key costs nothing extra.
//! * **Tuple format** — a composite key, fields concatenated in schema order:
//!   [`encode_tuple`] / [`decode_tuple`], [`encode_field`] and [`KeyEncoder`]. Bytes and
//!   strings are escaped and terminated so that no field's encoding is a prefix of
//!   another's; tuples of one schema then compare field by field.
//!
//! Fixed-width values are identical in both formats, so a one-`u64` tuple encodes exactly
//! as [`encode_u64`]. Keys of different schemas are not meant to be compared.
//!
//! Why the escaped format keeps the order: scanning two escaped fields left to right, the
//! first differing position is either two different non-zero data bytes (data order), a
//! zero data byte (`0x00 0xFF`) against a non-zero one (`0x00` sorts first, as the zero
//! does), or the end of one field (`0x00 0x00`) against more data (`0x00 0xFF` or a
//! non-zero byte, both larger), so the shorter field sorts first, as a prefix should. The
//! terminator never occurs inside a field, so whatever follows it (the next field) only
//! matters when the fields are equal.
//!
//! ```
//! use elastree::key::{decode_tuple, encode_tuple, KeyPart, KeyType};
//!
//! let (mut a, mut b) = (Vec::new(), Vec::new());
//! encode_tuple(&[KeyPart::Str("ab".into()), KeyPart::I64(-5)], &mut a);
//! encode_tuple(&[KeyPart::Str("ab\0".into()), KeyPart::I64(-9)], &mut b);
//! assert!(a < b); // "ab" < "ab\0", whatever the second field says
//! let parts = decode_tuple(&a, &[KeyType::Str, KeyType::I64]).unwrap();
//! assert_eq!(parts, vec![KeyPart::Str("ab".into()), KeyPart::I64(-5)]);
//! ```

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

/// Width in bytes of an encoded `u64`, `i64` or `f64`.
pub const FIXED_WIDTH: usize = 8;

const SIGN: u64 = 1 << 63;
/// Inside a tuple-format field, `0x00` starts a two-byte sequence...
const ESCAPE: u8 = 0x00;
/// ...that is a zero data byte when followed by `0xFF`...
const ESCAPED_ZERO: u8 = 0xFF;
/// ...and the end of the field when followed by `0x00`.
const TERMINATOR: u8 = 0x00;

/// The type of one key field: the schema of a key is a `&[KeyType]`.
///
/// The derived order (declaration order) is the order [`KeyPart`] uses between values of
/// different types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyType {
    /// Unsigned 64-bit integer.
    U64,
    /// Signed 64-bit integer.
    I64,
    /// 64-bit float, ordered by IEEE 754 total order ([`f64::total_cmp`]).
    F64,
    /// Arbitrary bytes, ordered lexicographically.
    Bytes,
    /// UTF-8 string, ordered by its bytes (which is code point order).
    Str,
}

impl KeyType {
    /// Every type, in [`KeyType`] order.
    pub const ALL: [KeyType; 5] = [
        KeyType::U64,
        KeyType::I64,
        KeyType::F64,
        KeyType::Bytes,
        KeyType::Str,
    ];

    /// The encoded width of this type, or `None` for the variable-length bytes and str.
    pub fn fixed_width(self) -> Option<usize> {
        match self {
            KeyType::U64 | KeyType::I64 | KeyType::F64 => Some(FIXED_WIDTH),
            KeyType::Bytes | KeyType::Str => None,
        }
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyType::U64 => "u64",
            KeyType::I64 => "i64",
            KeyType::F64 => "f64",
            KeyType::Bytes => "bytes",
            KeyType::Str => "str",
        })
    }
}

/// One typed key field.
///
/// Equality and order are those of the encoding: values of one type compare naturally,
/// with `f64` by [`f64::total_cmp`] (so `-0.0 < 0.0` and a NaN equals itself bit for bit);
/// values of different types compare by [`KeyType`] order.
#[derive(Debug, Clone)]
pub enum KeyPart {
    /// A `u64` field.
    U64(u64),
    /// An `i64` field.
    I64(i64),
    /// An `f64` field.
    F64(f64),
    /// A byte-string field.
    Bytes(Vec<u8>),
    /// A UTF-8 string field.
    Str(String),
}

impl KeyPart {
    /// The type of this value.
    pub fn key_type(&self) -> KeyType {
        match self {
            KeyPart::U64(_) => KeyType::U64,
            KeyPart::I64(_) => KeyType::I64,
            KeyPart::F64(_) => KeyType::F64,
            KeyPart::Bytes(_) => KeyType::Bytes,
            KeyPart::Str(_) => KeyType::Str,
        }
    }
}

impl Ord for KeyPart {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (KeyPart::U64(a), KeyPart::U64(b)) => a.cmp(b),
            (KeyPart::I64(a), KeyPart::I64(b)) => a.cmp(b),
            (KeyPart::F64(a), KeyPart::F64(b)) => a.total_cmp(b),
            (KeyPart::Bytes(a), KeyPart::Bytes(b)) => a.cmp(b),
            (KeyPart::Str(a), KeyPart::Str(b)) => a.cmp(b),
            _ => self.key_type().cmp(&other.key_type()),
        }
    }
}

impl PartialOrd for KeyPart {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for KeyPart {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for KeyPart {}

impl Hash for KeyPart {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key_type().hash(state);
        match self {
            KeyPart::U64(v) => v.hash(state),
            KeyPart::I64(v) => v.hash(state),
            KeyPart::F64(v) => v.to_bits().hash(state),
            KeyPart::Bytes(v) => v.hash(state),
            KeyPart::Str(v) => v.hash(state),
        }
    }
}

/// A key that could not be decoded. Decoding never panics; it returns one of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyDecodeError {
    /// The key ends inside the field with this index in the schema.
    #[error("the key ends inside field {0}")]
    Truncated(usize),
    /// The byte at this offset follows a `0x00` inside a bytes or str field but is neither
    /// `0x00` (end of field) nor `0xFF` (escaped zero).
    #[error("byte {0} follows 0x00 in a bytes or str field but is neither 0x00 nor 0xff")]
    BadEscape(usize),
    /// The str field with this index is not valid UTF-8 (index 0 for a single-format key).
    #[error("field {0} is a str but not valid UTF-8")]
    InvalidUtf8(usize),
    /// Bytes remain after the last field of the schema, from this offset on.
    #[error("bytes remain after the last field, from byte {0}")]
    TrailingBytes(usize),
    /// A single-format u64, i64 or f64 key has this length instead of 8.
    #[error("a u64, i64 or f64 key has 8 bytes, not {0}")]
    WrongLength(usize),
}

/// Encodes a `u64`: 8 bytes, big-endian.
pub fn encode_u64(v: u64) -> [u8; FIXED_WIDTH] {
    v.to_be_bytes()
}

/// Decodes an 8-byte key made by [`encode_u64`].
pub fn decode_u64(key: &[u8]) -> Result<u64, KeyDecodeError> {
    Ok(u64::from_be_bytes(fixed(key)?))
}

/// Encodes an `i64`: the two's complement bits with the sign bit flipped, big-endian, so
/// `i64::MIN` encodes as all zeros and `-1 < 0` holds bytewise.
pub fn encode_i64(v: i64) -> [u8; FIXED_WIDTH] {
    ((v as u64) ^ SIGN).to_be_bytes()
}

/// Decodes an 8-byte key made by [`encode_i64`].
pub fn decode_i64(key: &[u8]) -> Result<i64, KeyDecodeError> {
    Ok((u64::from_be_bytes(fixed(key)?) ^ SIGN) as i64)
}

/// Encodes an `f64` in IEEE 754 total order, big-endian: a value with the sign bit set has
/// all its bits flipped (larger magnitudes sort first), any other value has only its sign
/// bit flipped (sorting after all negatives). The order is [`f64::total_cmp`]:
/// `-NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN`. Every bit pattern round-trips.
pub fn encode_f64(v: f64) -> [u8; FIXED_WIDTH] {
    let bits = v.to_bits();
    let flip = if bits & SIGN != 0 { u64::MAX } else { SIGN };
    (bits ^ flip).to_be_bytes()
}

/// Decodes an 8-byte key made by [`encode_f64`], bit for bit.
pub fn decode_f64(key: &[u8]) -> Result<f64, KeyDecodeError> {
    let enc = u64::from_be_bytes(fixed(key)?);
    let flip = if enc & SIGN != 0 { SIGN } else { u64::MAX };
    Ok(f64::from_bits(enc ^ flip))
}

fn fixed(key: &[u8]) -> Result<[u8; FIXED_WIDTH], KeyDecodeError> {
    key.try_into()
        .map_err(|_| KeyDecodeError::WrongLength(key.len()))
}

/// Appends one value in the **single format** to `out`: fixed-width types as
/// [`encode_u64`] and friends, bytes and strings raw (no escaping, no terminator). Use it
/// when the value is the whole key; [`decode_single`] reverses it.
pub fn encode_single(part: &KeyPart, out: &mut Vec<u8>) {
    match part {
        KeyPart::Bytes(b) => out.extend_from_slice(b),
        KeyPart::Str(s) => out.extend_from_slice(s.as_bytes()),
        fixed => encode_field(fixed, out),
    }
}

/// Decodes a whole single-format key of type `ty`, made by [`encode_single`].
pub fn decode_single(key: &[u8], ty: KeyType) -> Result<KeyPart, KeyDecodeError> {
    Ok(match ty {
        KeyType::U64 => KeyPart::U64(decode_u64(key)?),
        KeyType::I64 => KeyPart::I64(decode_i64(key)?),
        KeyType::F64 => KeyPart::F64(decode_f64(key)?),
        KeyType::Bytes => KeyPart::Bytes(key.to_vec()),
        KeyType::Str => KeyPart::Str(
            String::from_utf8(key.to_vec()).map_err(|_| KeyDecodeError::InvalidUtf8(0))?,
        ),
    })
}

/// Appends one field in the **tuple format** to `out`: fixed-width types as in the single
/// format; bytes and strings with every `0x00` written as `0x00 0xFF`, then the terminator
/// `0x00 0x00`.
pub fn encode_field(part: &KeyPart, out: &mut Vec<u8>) {
    match part {
        KeyPart::U64(v) => out.extend_from_slice(&encode_u64(*v)),
        KeyPart::I64(v) => out.extend_from_slice(&encode_i64(*v)),
        KeyPart::F64(v) => out.extend_from_slice(&encode_f64(*v)),
        KeyPart::Bytes(b) => encode_escaped(b, out),
        KeyPart::Str(s) => encode_escaped(s.as_bytes(), out),
    }
}

fn encode_escaped(data: &[u8], out: &mut Vec<u8>) {
    out.reserve(data.len() + 2);
    for chunk in data.split(|&b| b == 0) {
        out.extend_from_slice(chunk);
        out.extend_from_slice(&[ESCAPE, ESCAPED_ZERO]);
    }
    // `split` yields one more chunk than there are zeros: the last escape is the terminator.
    let len = out.len();
    out[len - 1] = TERMINATOR;
}

/// Appends a composite key in the **tuple format** to `out`: each field as
/// [`encode_field`], in order. `out` is not cleared, so a key can be built after a prefix.
/// [`decode_tuple`] reverses it.
pub fn encode_tuple(parts: &[KeyPart], out: &mut Vec<u8>) {
    for part in parts {
        encode_field(part, out);
    }
}

/// Decodes a whole tuple-format key whose fields have the types in `schema`. Any input
/// that decodes re-encodes to exactly the same bytes (the format is canonical); anything
/// else — a short key, a bad escape, invalid UTF-8, trailing bytes — is an error.
pub fn decode_tuple(key: &[u8], schema: &[KeyType]) -> Result<Vec<KeyPart>, KeyDecodeError> {
    let mut pos = 0;
    let mut parts = Vec::with_capacity(schema.len());
    for (field, &ty) in schema.iter().enumerate() {
        let part = match ty {
            KeyType::U64 | KeyType::I64 | KeyType::F64 => {
                let end = pos + FIXED_WIDTH;
                let bytes = key.get(pos..end).ok_or(KeyDecodeError::Truncated(field))?;
                pos = end;
                decode_single(bytes, ty)?
            }
            KeyType::Bytes => KeyPart::Bytes(decode_escaped(key, &mut pos, field)?),
            KeyType::Str => {
                let data = decode_escaped(key, &mut pos, field)?;
                let s = String::from_utf8(data).map_err(|_| KeyDecodeError::InvalidUtf8(field))?;
                KeyPart::Str(s)
            }
        };
        parts.push(part);
    }
    if pos < key.len() {
        return Err(KeyDecodeError::TrailingBytes(pos));
    }
    Ok(parts)
}

/// Decodes the escaped field starting at `*pos` and moves `*pos` past its terminator.
fn decode_escaped(key: &[u8], pos: &mut usize, field: usize) -> Result<Vec<u8>, KeyDecodeError> {
    let mut data = Vec::new();
    let mut at = *pos;
    loop {
        let rest = &key[at..];
        let zero = rest.iter().position(|&b| b == ESCAPE);
        let zero = zero.ok_or(KeyDecodeError::Truncated(field))?;
        data.extend_from_slice(&rest[..zero]);
        let next = at + zero + 1;
        match key.get(next) {
            None => return Err(KeyDecodeError::Truncated(field)),
            Some(&TERMINATOR) => {
                *pos = next + 1;
                return Ok(data);
            }
            Some(&ESCAPED_ZERO) => data.push(0),
            Some(_) => return Err(KeyDecodeError::BadEscape(next)),
        }
        at = next + 1;
    }
}

/// Builds a tuple-format key field by field; the result equals [`encode_tuple`] of the
/// same fields.
///
/// ```
/// use elastree::key::{encode_tuple, KeyEncoder, KeyPart};
///
/// let key = KeyEncoder::new().push_str("eu").push_u64(42).finish();
/// let mut expected = Vec::new();
/// encode_tuple(&[KeyPart::Str("eu".into()), KeyPart::U64(42)], &mut expected);
/// assert_eq!(key, expected);
/// ```
#[derive(Debug, Clone, Default)]
pub struct KeyEncoder {
    buf: Vec<u8>,
}

impl KeyEncoder {
    /// An encoder with an empty key.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a `u64` field.
    pub fn push_u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&encode_u64(v));
        self
    }

    /// Appends an `i64` field.
    pub fn push_i64(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&encode_i64(v));
        self
    }

    /// Appends an `f64` field.
    pub fn push_f64(&mut self, v: f64) -> &mut Self {
        self.buf.extend_from_slice(&encode_f64(v));
        self
    }

    /// Appends a byte-string field (escaped and terminated).
    pub fn push_bytes(&mut self, v: &[u8]) -> &mut Self {
        encode_escaped(v, &mut self.buf);
        self
    }

    /// Appends a string field (escaped and terminated).
    pub fn push_str(&mut self, v: &str) -> &mut Self {
        encode_escaped(v.as_bytes(), &mut self.buf);
        self
    }

    /// Appends a field of any type.
    pub fn push_part(&mut self, part: &KeyPart) -> &mut Self {
        encode_field(part, &mut self.buf);
        self
    }

    /// The key built so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Takes the key built so far, leaving the encoder empty for the next key.
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tuple(parts: &[KeyPart]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_tuple(parts, &mut out);
        out
    }

    fn single(part: &KeyPart) -> Vec<u8> {
        let mut out = Vec::new();
        encode_single(part, &mut out);
        out
    }

    #[test]
    fn field_layouts() {
        assert_eq!(encode_u64(0x0102), [0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(encode_i64(i64::MIN), [0; 8]);
        assert_eq!(encode_i64(-1), (u64::MAX >> 1).to_be_bytes());
        assert_eq!(encode_i64(0), (1u64 << 63).to_be_bytes());
        assert_eq!(encode_f64(0.0), (1u64 << 63).to_be_bytes());
        assert_eq!(encode_f64(-0.0), (u64::MAX >> 1).to_be_bytes());
        assert_eq!(tuple(&[KeyPart::Bytes(vec![])]), [0, 0]);
        assert_eq!(tuple(&[KeyPart::Bytes(vec![0])]), [0, 0xff, 0, 0]);
        let s = [KeyPart::Str("a\0b".into())];
        assert_eq!(tuple(&s), [b'a', 0, 0xff, b'b', 0, 0]);
        assert_eq!(single(&s[0]), b"a\0b");
        assert_eq!(tuple(&[KeyPart::U64(7)]), single(&KeyPart::U64(7)));
    }

    #[test]
    fn float_order_follows_total_cmp() {
        let (neg_nan, tiny) = (f64::from_bits(u64::MAX), f64::from_bits(1));
        let (inf, min_pos) = (f64::INFINITY, f64::MIN_POSITIVE);
        let values = [
            neg_nan,
            -inf,
            f64::MIN,
            -1.0,
            -min_pos,
            -0.0,
            0.0,
            tiny,
            1.0,
            inf,
            f64::NAN,
        ];
        for w in values.windows(2) {
            assert_eq!(w[0].total_cmp(&w[1]), Ordering::Less);
            assert!(encode_f64(w[0]) < encode_f64(w[1]), "{} < {}", w[0], w[1]);
        }
    }

    #[test]
    fn builder_matches_encode_tuple() {
        use KeyPart::*;
        let parts = [
            U64(1),
            I64(-2),
            F64(3.5),
            Bytes(vec![0, 1]),
            Str("x".into()),
        ];
        let mut enc = KeyEncoder::new();
        enc.push_u64(1).push_i64(-2).push_f64(3.5);
        enc.push_bytes(&[0, 1]).push_str("x");
        assert_eq!(enc.as_bytes(), tuple(&parts));
        assert_eq!(enc.finish(), tuple(&parts));
        assert!(enc.as_bytes().is_empty());
        assert_eq!(enc.push_part(&parts[1]).finish(), tuple(&parts[1..2]));
    }

    #[test]
    fn malformed_keys_are_errors() {
        use KeyDecodeError::*;
        let (b, s) = ([KeyType::Bytes], [KeyType::Str]);
        assert_eq!(decode_u64(&[1, 2, 3]), Err(WrongLength(3)));
        assert_eq!(decode_f64(&[0; 9]), Err(WrongLength(9)));
        assert_eq!(decode_tuple(&[0; 7], &[KeyType::I64]), Err(Truncated(0)));
        assert_eq!(decode_tuple(b"\0\0ab", &[b[0], b[0]]), Err(Truncated(1)));
        assert_eq!(decode_tuple(b"ab\0", &b), Err(Truncated(0)));
        assert_eq!(decode_tuple(b"a\0\x01", &b), Err(BadEscape(2)));
        assert_eq!(decode_tuple(b"a\0\0z", &b), Err(TrailingBytes(3)));
        assert_eq!(decode_tuple(b"\xff\0\0", &s), Err(InvalidUtf8(0)));
        assert_eq!(decode_single(b"\xff", KeyType::Str), Err(InvalidUtf8(0)));
        assert_eq!(decode_tuple(b"", &[]), Ok(vec![]));
        assert_eq!(Truncated(1).to_string(), "the key ends inside field 1");
    }

    #[test]
    fn cross_type_order_follows_key_type() {
        assert!(KeyPart::U64(u64::MAX) < KeyPart::I64(i64::MIN));
        assert!(KeyPart::F64(f64::NAN) < KeyPart::Bytes(vec![]));
        assert_eq!(KeyPart::F64(f64::NAN), KeyPart::F64(f64::NAN));
        assert_ne!(KeyPart::F64(0.0), KeyPart::F64(-0.0));
    }

    fn any_f64() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<u64>().prop_map(f64::from_bits),
            prop::sample::select(vec![0.0, -0.0, 1.0, -1.0, f64::NAN, f64::INFINITY]),
        ]
    }

    /// Bytes over a tiny alphabet that includes the escape bytes, so that shared prefixes,
    /// embedded zeros and `0xFF` after a zero are common.
    fn small_bytes() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', 0xfe, 0xff]), 0..6)
    }

    fn part(ty: KeyType) -> BoxedStrategy<KeyPart> {
        match ty {
            KeyType::U64 => prop_oneof![0..3u64, any::<u64>()]
                .prop_map(KeyPart::U64)
                .boxed(),
            KeyType::I64 => prop_oneof![-2..2i64, any::<i64>()]
                .prop_map(KeyPart::I64)
                .boxed(),
            KeyType::F64 => any_f64().prop_map(KeyPart::F64).boxed(),
            KeyType::Bytes => small_bytes().prop_map(KeyPart::Bytes).boxed(),
            KeyType::Str => "[a\0\u{e9}\u{10348}]{0,5}".prop_map(KeyPart::Str).boxed(),
        }
    }

    fn key_type() -> impl Strategy<Value = KeyType> {
        prop::sample::select(&KeyType::ALL[..])
    }

    fn parts_of(schema: &[KeyType]) -> Vec<BoxedStrategy<KeyPart>> {
        schema.iter().map(|&t| part(t)).collect()
    }

    /// A schema of 1 to 4 fields with two tuples of it.
    fn two_tuples() -> impl Strategy<Value = (Vec<KeyType>, Vec<KeyPart>, Vec<KeyPart>)> {
        prop::collection::vec(key_type(), 1..5)
            .prop_flat_map(|s| (parts_of(&s), parts_of(&s), Just(s)))
            .prop_map(|(a, b, s)| (s, a, b))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn integer_encodings_preserve_order(a: u64, b: u64, c: i64, d: i64) {
            prop_assert_eq!(encode_u64(a).cmp(&encode_u64(b)), a.cmp(&b));
            prop_assert_eq!(encode_i64(c).cmp(&encode_i64(d)), c.cmp(&d));
            prop_assert_eq!(decode_u64(&encode_u64(a)), Ok(a));
            prop_assert_eq!(decode_i64(&encode_i64(c)), Ok(c));
        }

        #[test]
        fn float_encoding_preserves_total_order(a in any_f64(), b in any_f64()) {
            prop_assert_eq!(encode_f64(a).cmp(&encode_f64(b)), a.total_cmp(&b));
            prop_assert_eq!(decode_f64(&encode_f64(a)).map(f64::to_bits), Ok(a.to_bits()));
        }

        #[test]
        fn single_encoding_preserves_order((ty, a, b) in key_type()
            .prop_flat_map(|t| (Just(t), part(t), part(t))))
        {
            prop_assert_eq!(single(&a).cmp(&single(&b)), a.cmp(&b));
            prop_assert_eq!(decode_single(&single(&a), ty), Ok(a));
        }

        #[test]
        fn tuple_encoding_preserves_field_order((schema, a, b) in two_tuples()) {
            let (ea, eb) = (tuple(&a), tuple(&b));
            // Vec<KeyPart> compares field by field, each field in its natural order.
            prop_assert_eq!(ea.cmp(&eb), a.cmp(&b));
            prop_assert_eq!(decode_tuple(&ea, &schema), Ok(a));
            prop_assert_eq!(decode_tuple(&eb, &schema), Ok(b));
        }

        #[test]
        fn garbage_decodes_to_an_error_or_to_itself(
            key in prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', 0xff]), 0..24),
            schema in prop::collection::vec(key_type(), 0..4),
        ) {
            if let Ok(parts) = decode_tuple(&key, &schema) {
                prop_assert_eq!(tuple(&parts), key.clone());
            }
            if let Some(&ty) = schema.first() {
                if let Ok(part) = decode_single(&key, ty) {
                    prop_assert_eq!(single(&part), key);
                }
            }
        }
    }
}
