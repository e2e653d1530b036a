//! The wire between the client and the function library: building `FCALL`s, reading their
//! replies, and the stored form of keys.

use redis::Value;

use crate::error::DistError;
use crate::index::RootRef;

/// `FCALL name 1 key args...`: one function call whose declared key fixes its slot.
pub(crate) fn fcall(name: &str, key: &str, args: &[&[u8]]) -> redis::Cmd {
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(name).arg(1).arg(key);
    for a in args {
        cmd.arg(*a);
    }
    cmd
}

/// A call of a sub-tree function: the tag's meta key declares the slot, then the tag, the
/// root id ([`root_arg`]) and the function's own arguments.
pub(crate) fn subtree_call(name: &str, tag: &str, root: u64, rest: &[&[u8]]) -> redis::Cmd {
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(name)
        .arg(1)
        .arg(format!("{tag}:m"))
        .arg(tag)
        .arg(&root_arg(root)[..]);
    for a in rest {
        cmd.arg(*a);
    }
    cmd
}

/// A root id as the functions take it: its 4 big-endian bytes (node ids are u32; the top's
/// references are checked to fit when they are parsed).
pub(crate) fn root_arg(id: u64) -> [u8; 4] {
    (id as u32).to_be_bytes()
}

/// A sub-tree function's reply: `{status, hint_sep, hint_id, items...}`, or a bare string,
/// which is an OK reply without a hint whose one item is that string (`et_get`'s leaf).
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: String,
    pub hint_sep: Vec<u8>,
    pub hint_id: u64,
    pub items: Vec<Value>,
}

static NIL: Value = Value::Nil;

impl Reply {
    /// Reads a reply, taking its items without copying them.
    pub fn parse(v: Value) -> Result<Reply, DistError> {
        if let Value::BulkString(_) = v {
            return Ok(Reply {
                status: "OK".into(),
                hint_sep: Vec::new(),
                hint_id: 0,
                items: vec![v],
            });
        }
        let Value::Array(mut parts) = v else {
            return Err(DistError::Corrupt(format!(
                "unexpected function reply {v:?}"
            )));
        };
        let status =
            String::from_utf8_lossy(&bytes_of(parts.first().unwrap_or(&NIL))?).into_owned();
        let hint_sep = match parts.get(1) {
            None | Some(Value::Nil) => Vec::new(),
            Some(v) => bytes_of(v)?,
        };
        let hint_id = match parts.get(2) {
            None | Some(Value::Nil) => 0,
            Some(v) => u64_of(v)?,
        };
        let items = if parts.len() > 3 {
            parts.split_off(3)
        } else {
            Vec::new()
        };
        Ok(Reply {
            status,
            hint_sep,
            hint_id,
            items,
        })
    }

    /// Item `i`, or nil.
    pub fn item(&self, i: usize) -> &Value {
        self.items.get(i).unwrap_or(&NIL)
    }
}

/// A bulk string reply's bytes, borrowed.
pub(crate) fn bytes_ref(v: &Value) -> Result<&[u8], DistError> {
    match v {
        Value::BulkString(b) => Ok(b),
        other => Err(DistError::Corrupt(format!(
            "expected a string, got {other:?}"
        ))),
    }
}

/// An integer reply (or a string of digits).
pub(crate) fn int(v: &Value) -> Result<i64, DistError> {
    match v {
        Value::Int(n) => Ok(*n),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| DistError::Corrupt(format!("expected a number, got {b:?}"))),
        Value::SimpleString(s) => s
            .parse()
            .map_err(|_| DistError::Corrupt(format!("expected a number, got {s:?}"))),
        other => Err(DistError::Corrupt(format!(
            "expected a number, got {other:?}"
        ))),
    }
}

/// A non-negative integer reply.
pub(crate) fn u64_of(v: &Value) -> Result<u64, DistError> {
    let n = int(v)?;
    u64::try_from(n).map_err(|_| DistError::Corrupt(format!("negative id {n}")))
}

/// A string reply's bytes.
pub(crate) fn bytes_of(v: &Value) -> Result<Vec<u8>, DistError> {
    match v {
        Value::BulkString(b) => Ok(b.clone()),
        Value::SimpleString(s) => Ok(s.as_bytes().to_vec()),
        Value::Okay => Ok(b"OK".to_vec()),
        Value::Int(n) => Ok(n.to_string().into_bytes()),
        other => Err(DistError::Corrupt(format!(
            "expected a string, got {other:?}"
        ))),
    }
}

/// A stored tid: 8 bytes, big-endian.
pub(crate) fn tid_of(v: &Value) -> Result<u64, DistError> {
    let b = bytes_of(v)?;
    let arr: [u8; 8] = b
        .as_slice()
        .try_into()
        .map_err(|_| DistError::Corrupt(format!("a stored tid has {} bytes, not 8", b.len())))?;
    Ok(u64::from_be_bytes(arr))
}

/// A tid or nil.
pub(crate) fn opt_tid(v: Option<&Value>) -> Result<Option<u64>, DistError> {
    match v {
        None | Some(Value::Nil) => Ok(None),
        Some(v) => tid_of(v).map(Some),
    }
}

/// The items of a removal's reply, `[old tid, "1" | "0"]` (none if the key was absent):
/// the tid the key had and whether it was removed.
pub(crate) fn removal(items: &[Value]) -> Result<(Option<u64>, bool), DistError> {
    let old = opt_tid(items.first())?;
    let removed = match items.get(1) {
        Some(v) => bytes_of(v)? == b"1",
        None => false,
    };
    Ok((old, removed))
}

/// "token:id", the top's reference to a sub-tree root.
pub(crate) fn root_ref(root: RootRef) -> String {
    format!("{}:{}", root.token, root.id)
}

/// Parses "token:id".
pub(crate) fn parse_root_ref(b: &[u8]) -> Option<RootRef> {
    let s = std::str::from_utf8(b).ok()?;
    let (token, id) = s.split_once(':')?;
    let id: u32 = id.parse().ok()?;
    Some(RootRef {
        token: token.parse().ok()?,
        id: u64::from(id),
    })
}

/// The (low fence, root) pairs of a LOWERED reply's items, in tag `token`.
pub(crate) fn children(items: &[Value], token: u64) -> Result<Vec<(Vec<u8>, RootRef)>, DistError> {
    let mut out = Vec::with_capacity(items.len() / 2);
    for pair in items.chunks(2) {
        let [lo, id] = pair else {
            return Err(DistError::Corrupt("odd list of lowered children".into()));
        };
        out.push((
            bytes_of(lo)?,
            RootRef {
                token,
                id: u64_of(id)?,
            },
        ));
    }
    if out.is_empty() {
        return Err(DistError::Corrupt("a lowered root without children".into()));
    }
    Ok(out)
}

/// The stored key of a non-unique index's pair: the key with every 0x00 escaped as
/// 0x00 0xFF, the terminator 0x00 0x00, then the big-endian tid. Byte order of stored keys is
/// (key, tid) order.
pub(crate) fn composite(key: &[u8], tid: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 10);
    for &b in key {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&tid.to_be_bytes());
    out
}

/// The (key, tid) of a stored composite key.
pub(crate) fn split_composite(stored: &[u8]) -> Option<(Vec<u8>, u64)> {
    let mut key = Vec::with_capacity(stored.len());
    let mut i = 0;
    while i < stored.len() {
        let b = stored[i];
        if b != 0 {
            key.push(b);
            i += 1;
            continue;
        }
        match stored.get(i + 1)? {
            0xFF => {
                key.push(0);
                i += 2;
            }
            0 => {
                let tid: [u8; 8] = stored.get(i + 2..)?.try_into().ok()?;
                return Some((key, u64::from_be_bytes(tid)));
            }
            _ => return None,
        }
    }
    None
}

/// The index's stored settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conf {
    pub unique: bool,
    pub capacity: usize,
}

impl Conf {
    /// From the `HGETALL` of the settings hash.
    pub fn parse(v: &Value) -> Result<Conf, DistError> {
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = match v {
            Value::Array(items) => items
                .chunks(2)
                .filter(|c| c.len() == 2)
                .map(|c| Ok((bytes_of(&c[0])?, bytes_of(&c[1])?)))
                .collect::<Result<_, DistError>>()?,
            Value::Map(items) => items
                .iter()
                .map(|(k, v)| Ok((bytes_of(k)?, bytes_of(v)?)))
                .collect::<Result<_, DistError>>()?,
            other => return Err(DistError::Corrupt(format!("settings reply {other:?}"))),
        };
        let field = |name: &[u8]| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
                .ok_or_else(|| {
                    DistError::Corrupt(format!(
                        "the index's settings lack {:?}",
                        String::from_utf8_lossy(name)
                    ))
                })
        };
        Ok(Conf {
            unique: field(b"unique")? == "1",
            capacity: field(b"capacity")?
                .parse()
                .map_err(|_| DistError::Corrupt("bad capacity setting".into()))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composite_keys_order_by_key_then_tid_and_round_trip() {
        let keys: Vec<&[u8]> = vec![
            b"", b"\0", b"\0\0", b"\0\x01", b"a", b"a\0", b"a\0b", b"ab", b"\xff",
        ];
        let mut stored = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            for tid in [0u64, 1, 0xFF, u64::MAX] {
                stored.push((composite(k, tid), i, tid));
            }
        }
        let mut sorted = stored.clone();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let order: Vec<(usize, u64)> = sorted.iter().map(|s| (s.1, s.2)).collect();
        let expected: Vec<(usize, u64)> = stored.iter().map(|s| (s.1, s.2)).collect();
        assert_eq!(order, expected, "stored order must be (key, tid) order");
        for (c, i, tid) in &stored {
            assert_eq!(split_composite(c), Some((keys[*i].to_vec(), *tid)));
        }
        assert_eq!(split_composite(b"ab"), None);
        assert_eq!(split_composite(b"a\0\x05"), None);
    }

    #[test]
    fn root_refs_round_trip() {
        let r = RootRef {
            token: 17,
            id: 4242,
        };
        assert_eq!(parse_root_ref(root_ref(r).as_bytes()), Some(r));
        assert_eq!(parse_root_ref(b"x:1"), None);
    }
}
