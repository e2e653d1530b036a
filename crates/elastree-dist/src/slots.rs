//! Hash slots: which slot a key's hash tag falls in, and which master owns each slot.

use std::collections::BTreeSet;

use redis::Value;

/// The number of hash slots of a Redis Cluster.
pub const SLOTS: usize = 16384;

const XMODEM: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);

/// The slot of a Redis key: CRC16-XMODEM of its hash tag (the part between the first `{`
/// and the next `}`, when non-empty), else of the whole key, modulo 16384.
pub fn slot_of(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    XMODEM.checksum(hashed) % SLOTS as u16
}

/// One master and the replicas that follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotOwner {
    /// "host:port" of the master.
    pub addr: String,
    /// How many replicas it has.
    pub replicas: usize,
}

/// The owner of every slot, as `CLUSTER SLOTS` reported it.
#[derive(Debug, Clone, Default)]
pub struct SlotMap {
    owners: Vec<SlotOwner>,
    /// Per slot, an index into `owners` (u16::MAX: no owner known).
    by_slot: Vec<u16>,
}

impl SlotMap {
    /// Parses a `CLUSTER SLOTS` reply.
    pub fn from_cluster_slots(reply: &Value) -> Result<SlotMap, String> {
        let ranges = match reply {
            Value::Array(items) => items,
            other => return Err(format!("CLUSTER SLOTS answered {other:?}")),
        };
        let mut map = SlotMap {
            owners: Vec::new(),
            by_slot: vec![u16::MAX; SLOTS],
        };
        for range in ranges {
            let Value::Array(fields) = range else {
                return Err("malformed CLUSTER SLOTS range".into());
            };
            let (start, end) = match (fields.first(), fields.get(1)) {
                (Some(Value::Int(s)), Some(Value::Int(e))) => (*s as usize, *e as usize),
                _ => return Err("malformed CLUSTER SLOTS range bounds".into()),
            };
            let addr = match fields.get(2) {
                Some(Value::Array(node)) => node_addr(node)?,
                _ => return Err("CLUSTER SLOTS range without a master".into()),
            };
            let owner = SlotOwner {
                addr,
                replicas: fields.len().saturating_sub(3),
            };
            let index = match map.owners.iter().position(|o| o.addr == owner.addr) {
                Some(i) => i,
                None => {
                    map.owners.push(owner);
                    map.owners.len() - 1
                }
            };
            if end >= SLOTS || start > end {
                return Err(format!("slot range {start}-{end} out of bounds"));
            }
            for slot in start..=end {
                map.by_slot[slot] = index as u16;
            }
        }
        Ok(map)
    }

    /// How many slots have a known owner.
    pub fn covered(&self) -> usize {
        self.by_slot.iter().filter(|&&i| i != u16::MAX).count()
    }

    /// The master owning `slot`.
    pub fn owner(&self, slot: u16) -> Option<&SlotOwner> {
        match self.by_slot.get(slot as usize) {
            Some(&i) if i != u16::MAX => self.owners.get(i as usize),
            _ => None,
        }
    }

    /// The replicas of the master at `addr` (0 if unknown).
    pub fn replicas_of(&self, addr: &str) -> usize {
        self.owners
            .iter()
            .find(|o| o.addr == addr)
            .map_or(0, |o| o.replicas)
    }

    /// Whether every slot has the same owner in both maps.
    pub fn same_owners(&self, other: &SlotMap) -> bool {
        (0..SLOTS as u16)
            .all(|slot| self.owner(slot).map(|o| &o.addr) == other.owner(slot).map(|o| &o.addr))
    }

    /// How many masters own slots.
    pub fn master_count(&self) -> usize {
        self.owners.len()
    }

    /// The addresses of the masters that own slots, sorted.
    pub fn masters(&self) -> Vec<String> {
        let set: BTreeSet<&String> = self.owners.iter().map(|o| &o.addr).collect();
        set.into_iter().cloned().collect()
    }
}

fn node_addr(node: &[Value]) -> Result<String, String> {
    let host = match node.first() {
        Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(Value::SimpleString(s)) => s.clone(),
        _ => return Err("CLUSTER SLOTS node without a host".into()),
    };
    let port = match node.get(1) {
        Some(Value::Int(p)) => *p,
        _ => return Err("CLUSTER SLOTS node without a port".into()),
    };
    let host = if host.is_empty() {
        "127.0.0.1".into()
    } else {
        host
    };
    Ok(format!("{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_redis_cluster_specification() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(slot_of(b"123456789"), 0x31C3);
        assert_eq!(slot_of(b"foo"), 12182);
        assert_eq!(slot_of(b"{user1000}.following"), slot_of(b"user1000"));
        assert_eq!(slot_of(b"foo{}{bar}"), slot_of(b"foo{}{bar}"));
        assert_ne!(slot_of(b"foo{}{bar}"), slot_of(b"bar"));
        assert_eq!(slot_of(b"foo{{bar}}zap"), slot_of(b"{bar"));
    }

    #[test]
    fn a_cluster_slots_reply_maps_every_slot() {
        let node = |port: i64| {
            Value::Array(vec![
                Value::BulkString(b"127.0.0.1".to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(8191),
                node(7000),
                node(7003),
            ]),
            Value::Array(vec![Value::Int(8192), Value::Int(16383), node(7001)]),
        ]);
        let map = SlotMap::from_cluster_slots(&reply).unwrap();
        assert_eq!(map.covered(), SLOTS);
        assert_eq!(map.owner(0).unwrap().addr, "127.0.0.1:7000");
        assert_eq!(map.owner(16383).unwrap().addr, "127.0.0.1:7001");
        assert_eq!(map.replicas_of("127.0.0.1:7000"), 1);
        assert_eq!(map.replicas_of("127.0.0.1:7001"), 0);
        assert_eq!(map.masters().len(), 2);
    }
}
