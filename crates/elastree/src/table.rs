//! In-memory tuple store, and [`KeySource`]: tuple id -> key bytes.
//!
//! A [`Table`] holds rows of typed [`Value`]s checked against a [`Schema`]. Each appended
//! row gets the next tuple id (tid), starting at 0; tids are never reused, and a deleted
//! row reads as absent. Some of the columns form the table's key, whose order-preserving
//! encoding ([`Table::key_of`]) is what an index stores for the row:
//!
//! * **one key column**: the single format of [`crate::key`] ([`key::encode_single`]),
//!   so a lone string or byte-string key is stored raw, without escaping;
//! * **several key columns**: the tuple format ([`key::encode_tuple`]), fields in the
//!   order the key columns were given.
//!
//! Indexes that store keys indirectly (the elastic B+-tree's compact leaves keep only
//! tids) load a key through the [`KeySource`] trait, from many threads while rows are
//! being appended. So a table is `Sync`, and reads take no lock: rows live in chunks that
//! are allocated once and never move (chunk `k` holds `64 << k` rows), each row slot is
//! written once through a [`OnceLock`], and deletion is a flag. The storage of deleted
//! rows is kept until [`Table::purge_deleted`], which needs `&mut self` and so runs when
//! no reader can hold a row.
//!
//! ```
//! use elastree::key::KeyType;
//! use elastree::table::{KeySource, Schema, Table, Value};
//!
//! let schema = Schema::new([("id", KeyType::U64), ("name", KeyType::Str)]).unwrap();
//! let table = Table::new(schema, &["name"]).unwrap();
//! let tid = table.append(vec![Value::U64(7), Value::Str("ada".into())]).unwrap();
//! let mut key = Vec::new();
//! assert!(table.key(tid, &mut key));
//! assert_eq!(key, b"ada");
//! assert!(table.delete(tid));
//! assert!(table.get(tid).is_none());
//! ```

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::key::{self, KeyDecodeError, KeyPart, KeyType};

/// A column value: the key module's typed value, so key columns encode without conversion.
pub type Value = KeyPart;

/// Returns the key bytes of a tuple id, for structures that store keys indirectly.
///
/// Implementations are called concurrently from many threads and must not block each
/// other for long. The key of a live tid must not change, and an index must only hold tids
/// whose keys the source can still return.
pub trait KeySource: Send + Sync {
    /// Replaces the contents of `out` with the key of `tid` and returns true, or clears
    /// `out` and returns false when `tid` is not a live tuple.
    fn key(&self, tid: u64, out: &mut Vec<u8>) -> bool;

    /// Hints that the key of `tid` will be asked for soon, so the source can start loading
    /// it into cache (a range scan over keys stored indirectly asks for many at once). The
    /// default does nothing; it must never fault, whatever the tid.
    #[inline]
    fn prefetch(&self, tid: u64) {
        let _ = tid;
    }
}

impl<T: KeySource + ?Sized> KeySource for &T {
    fn key(&self, tid: u64, out: &mut Vec<u8>) -> bool {
        (**self).key(tid, out)
    }
    #[inline]
    fn prefetch(&self, tid: u64) {
        (**self).prefetch(tid)
    }
}

impl<T: KeySource + ?Sized> KeySource for Arc<T> {
    fn key(&self, tid: u64, out: &mut Vec<u8>) -> bool {
        (**self).key(tid, out)
    }
    #[inline]
    fn prefetch(&self, tid: u64) {
        (**self).prefetch(tid)
    }
}

/// A fixed list of keys, tid `i` being `self[i]`; handy in tests.
impl KeySource for Vec<Vec<u8>> {
    fn key(&self, tid: u64, out: &mut Vec<u8>) -> bool {
        out.clear();
        let found = usize::try_from(tid).ok().and_then(|i| self.get(i));
        found.inspect(|k| out.extend_from_slice(k)).is_some()
    }
    #[inline]
    fn prefetch(&self, tid: u64) {
        if let Some(key) = usize::try_from(tid).ok().and_then(|i| self.get(i)) {
            crate::node::prefetch(key.as_slice());
        }
    }
}

/// A [`KeySource`] made of a function `(tid, out) -> found` that appends the key of `tid`
/// to `out` (which it receives cleared).
#[derive(Debug, Clone, Copy)]
pub struct FnKeySource<F>(pub F);

impl<F: Fn(u64, &mut Vec<u8>) -> bool + Send + Sync> KeySource for FnKeySource<F> {
    fn key(&self, tid: u64, out: &mut Vec<u8>) -> bool {
        out.clear();
        let found = (self.0)(tid, out);
        if !found {
            out.clear();
        }
        found
    }
}

/// A row or schema that does not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// The row has a different number of values than the schema has columns.
    #[error("the row has {found} values but the schema has {expected} columns")]
    Arity {
        /// Columns in the schema (or key columns, for a key).
        expected: usize,
        /// Values given.
        found: usize,
    },
    /// A value's type differs from its column's.
    #[error("column {column} ({name}) holds {expected}, got {found}")]
    TypeMismatch {
        /// Position of the column.
        column: usize,
        /// Name of the column.
        name: String,
        /// The column's type.
        expected: KeyType,
        /// The value's type.
        found: KeyType,
    },
    /// A schema without columns, or a table without key columns.
    #[error("a schema needs at least one column and a table at least one key column")]
    Empty,
    /// Two columns, or two key columns, have the same name.
    #[error("column {0:?} appears twice")]
    DuplicateColumn(String),
    /// A key column names no column of the schema.
    #[error("no column is named {0:?}")]
    UnknownColumn(String),
    /// All 2^64 tids have been handed out (cannot happen on a 64-bit machine in practice).
    #[error("the table has no tuple ids left")]
    Full,
}

/// A named, typed column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The column's name, unique in its schema.
    pub name: String,
    /// The type of its values.
    pub ty: KeyType,
}

/// The columns of a table, in row order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    columns: Vec<Column>,
}

impl Schema {
    /// A schema of `(name, type)` columns; names must be unique and there must be one.
    pub fn new<I, S>(columns: I) -> Result<Self, TableError>
    where
        I: IntoIterator<Item = (S, KeyType)>,
        S: Into<String>,
    {
        let mut out: Vec<Column> = Vec::new();
        for (name, ty) in columns {
            let name = name.into();
            if out.iter().any(|c| c.name == name) {
                return Err(TableError::DuplicateColumn(name));
            }
            out.push(Column { name, ty });
        }
        if out.is_empty() {
            return Err(TableError::Empty);
        }
        Ok(Schema { columns: out })
    }

    /// The columns, in row order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The position of the column called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// Checks that `row` has one value per column, each of its column's type.
    pub fn check(&self, row: &[Value]) -> Result<(), TableError> {
        check_values(self.columns.iter().enumerate(), row)
    }
}

/// Checks `values` against `(position, column)` pairs, one value per column.
fn check_values<'a>(
    columns: impl ExactSizeIterator<Item = (usize, &'a Column)>,
    values: &[Value],
) -> Result<(), TableError> {
    let (expected, found) = (columns.len(), values.len());
    if expected != found {
        return Err(TableError::Arity { expected, found });
    }
    for ((column, c), v) in columns.zip(values) {
        let (expected, found) = (c.ty, v.key_type());
        if expected != found {
            let name = c.name.clone();
            return Err(TableError::TypeMismatch {
                column,
                name,
                expected,
                found,
            });
        }
    }
    Ok(())
}

/// log2 of the number of rows in the first chunk.
const FIRST_CHUNK_BITS: u32 = 6;
/// Chunk `k` holds `64 << k` rows, so chunks 0..=58 cover every `u64` tid.
const CHUNKS: usize = (u64::BITS - FIRST_CHUNK_BITS + 1) as usize;

/// One row's place. `row` is set once, by the append that got the tid.
#[derive(Default)]
struct Slot {
    row: OnceLock<Box<[Value]>>,
    deleted: AtomicBool,
}

/// The chunk holding `tid` and the position in it: tids `64 * (2^k - 1)` up to
/// `64 * (2^(k+1) - 1)` are in chunk `k`.
fn locate(tid: u64) -> Option<(usize, usize)> {
    let x = (tid >> FIRST_CHUNK_BITS) + 1;
    let k = x.ilog2();
    let first = ((1u64 << k) - 1) << FIRST_CHUNK_BITS;
    Some((k as usize, usize::try_from(tid - first).ok()?))
}

fn row_bytes(row: &[Value]) -> usize {
    let heap: usize = row
        .iter()
        .map(|v| match v {
            Value::Bytes(b) => b.capacity(),
            Value::Str(s) => s.capacity(),
            _ => 0,
        })
        .sum();
    size_of_val(row) + heap
}

/// An in-memory, append-only row store with a designated key; see the [module](self) docs.
pub struct Table {
    schema: Schema,
    key_columns: Vec<usize>,
    chunks: [OnceLock<Box<[Slot]>>; CHUNKS],
    next_tid: AtomicU64,
    live: AtomicUsize,
    /// Heap bytes of chunks and rows, kept up to date by append and purge.
    heap_bytes: AtomicUsize,
}

impl Table {
    /// An empty table whose key is made of the columns named in `key_columns`, in order.
    pub fn new(schema: Schema, key_columns: &[&str]) -> Result<Self, TableError> {
        if key_columns.is_empty() {
            return Err(TableError::Empty);
        }
        let mut key = Vec::with_capacity(key_columns.len());
        for &name in key_columns {
            let i = schema
                .index_of(name)
                .ok_or_else(|| TableError::UnknownColumn(name.to_owned()))?;
            if key.contains(&i) {
                return Err(TableError::DuplicateColumn(name.to_owned()));
            }
            key.push(i);
        }
        Ok(Table {
            schema,
            key_columns: key,
            chunks: std::array::from_fn(|_| OnceLock::new()),
            next_tid: AtomicU64::new(0),
            live: AtomicUsize::new(0),
            heap_bytes: AtomicUsize::new(0),
        })
    }

    /// The table's schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Positions of the key columns in the schema, in key order.
    pub fn key_columns(&self) -> &[usize] {
        &self.key_columns
    }

    /// Types of the key columns, in key order: the schema for [`Table::decode_key`].
    pub fn key_types(&self) -> Vec<KeyType> {
        self.key_columns
            .iter()
            .map(|&c| self.schema.columns[c].ty)
            .collect()
    }

    /// Appends a row and returns its tid, or an error (and changes nothing) when the row
    /// does not match the schema.
    pub fn append(&self, row: Vec<Value>) -> Result<u64, TableError> {
        self.schema.check(&row)?;
        let row: Box<[Value]> = row.into_iter().map(shrink).collect();
        let bytes = row_bytes(&row);
        // 2^64 appends would take centuries, so the counter does not wrap in practice;
        // `locate` failing (only possible where usize is narrower) is reported as Full.
        let tid = self.next_tid.fetch_add(1, Ordering::Relaxed);
        let (k, i) = locate(tid).ok_or(TableError::Full)?;
        let chunk = self.chunks.get(k).ok_or(TableError::Full)?.get_or_init(|| {
            let chunk: Box<[Slot]> = (0..64usize << k).map(|_| Slot::default()).collect();
            self.heap_bytes
                .fetch_add(size_of_val(&*chunk), Ordering::Relaxed);
            chunk
        });
        let slot = chunk.get(i).ok_or(TableError::Full)?;
        // Counted before the row is visible, so a delete never decrements below zero.
        self.live.fetch_add(1, Ordering::Relaxed);
        self.heap_bytes.fetch_add(bytes, Ordering::Relaxed);
        let fresh = slot.row.set(row).is_ok();
        debug_assert!(fresh, "tid {tid} handed out twice");
        Ok(tid)
    }

    fn slot(&self, tid: u64) -> Option<&Slot> {
        let (k, i) = locate(tid)?;
        self.chunks.get(k)?.get()?.get(i)
    }

    /// The values of the live row `tid`, in schema order.
    pub fn get(&self, tid: u64) -> Option<&[Value]> {
        let slot = self.slot(tid)?;
        let row = slot.row.get()?;
        (!slot.deleted.load(Ordering::Acquire)).then_some(&**row)
    }

    /// Deletes row `tid`; true if it was live. Its tid is never handed out again, and its
    /// key is no longer available through [`KeySource`]: remove it from indexes first.
    pub fn delete(&self, tid: u64) -> bool {
        let Some(slot) = self.slot(tid) else {
            return false;
        };
        if slot.row.get().is_none() || slot.deleted.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.live.fetch_sub(1, Ordering::Relaxed);
        true
    }

    /// Frees the storage of deleted rows; returns how many were freed.
    pub fn purge_deleted(&mut self) -> usize {
        let mut freed = 0;
        for chunk in self.chunks.iter_mut().filter_map(OnceLock::get_mut) {
            for slot in chunk.iter_mut() {
                if !*slot.deleted.get_mut() {
                    continue;
                }
                if let Some(row) = slot.row.take() {
                    *self.heap_bytes.get_mut() -= row_bytes(&row);
                    freed += 1;
                }
            }
        }
        freed
    }

    /// Number of live rows.
    pub fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// True when no row is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One more than the largest tid handed out so far (0 for a new table).
    pub fn tid_bound(&self) -> u64 {
        self.next_tid.load(Ordering::Relaxed)
    }

    /// Bytes held by the table: the table itself, the schema, the row slots of every
    /// allocated chunk, each kept row's values and the heap capacity of its strings and
    /// byte strings. Deleted rows count until [`Table::purge_deleted`]; allocator overhead
    /// is not counted.
    pub fn memory_bytes(&self) -> usize {
        let schema: usize = self.schema.columns.iter().map(|c| c.name.capacity()).sum();
        size_of::<Self>()
            + schema
            + self.schema.columns.capacity() * size_of::<Column>()
            + self.key_columns.capacity() * size_of::<usize>()
            + self.heap_bytes.load(Ordering::Relaxed)
    }

    /// Replaces the contents of `out` with the encoded key of live row `tid` (single
    /// format for one key column, tuple format otherwise) and returns true; clears `out`
    /// and returns false when `tid` is not live.
    pub fn key_of(&self, tid: u64, out: &mut Vec<u8>) -> bool {
        out.clear();
        let Some(row) = self.get(tid) else {
            return false;
        };
        match self.key_columns[..] {
            [c] => key::encode_single(&row[c], out),
            _ => self
                .key_columns
                .iter()
                .for_each(|&c| key::encode_field(&row[c], out)),
        }
        true
    }

    /// Appends to `out` the key made of `values`, one per key column in key order, encoded
    /// as [`Table::key_of`] encodes a row's key: what to look a row up by in an index.
    pub fn encode_key(&self, values: &[Value], out: &mut Vec<u8>) -> Result<(), TableError> {
        let columns = self
            .key_columns
            .iter()
            .map(|&c| (c, &self.schema.columns[c]));
        check_values(columns, values)?;
        match values {
            [v] => key::encode_single(v, out),
            _ => key::encode_tuple(values, out),
        }
        Ok(())
    }

    /// Decodes a key made by [`Table::key_of`] or [`Table::encode_key`] into the values of
    /// the key columns.
    pub fn decode_key(&self, key: &[u8]) -> Result<Vec<Value>, KeyDecodeError> {
        match self.key_types()[..] {
            [ty] => Ok(vec![key::decode_single(key, ty)?]),
            ref types => key::decode_tuple(key, types),
        }
    }
}

fn shrink(mut v: Value) -> Value {
    match &mut v {
        Value::Bytes(b) => b.shrink_to_fit(),
        Value::Str(s) => s.shrink_to_fit(),
        _ => {}
    }
    v
}

impl KeySource for Table {
    fn key(&self, tid: u64, out: &mut Vec<u8>) -> bool {
        self.key_of(tid, out)
    }
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("schema", &self.schema)
            .field("key_columns", &self.key_columns)
            .field("len", &self.len())
            .field("tid_bound", &self.tid_bound())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyPart::{Bytes, Str, F64, I64, U64};
    use std::thread;

    /// Rows `(id, score, name, delta)` keyed by `(name, delta)`.
    fn people() -> Table {
        let columns = [("id", KeyType::U64), ("score", KeyType::F64)];
        let columns = columns
            .into_iter()
            .chain([("name", KeyType::Str), ("delta", KeyType::I64)]);
        Table::new(Schema::new(columns).unwrap(), &["name", "delta"]).unwrap()
    }

    fn person(id: u64, name: &str, delta: i64) -> Vec<Value> {
        vec![U64(id), F64(id as f64), Str(name.into()), I64(delta)]
    }

    fn key_of_person(name: &str, delta: i64) -> Vec<u8> {
        let mut k = Vec::new();
        key::encode_tuple(&[Str(name.into()), I64(delta)], &mut k);
        k
    }

    #[test]
    fn append_get_delete() {
        let t = people();
        assert!(t.is_empty() && t.get(0).is_none() && !t.delete(0));
        assert_eq!(t.append(person(1, "a", 1)), Ok(0));
        assert_eq!(t.append(person(2, "b", 2)), Ok(1));
        assert_eq!(t.get(1), Some(&person(2, "b", 2)[..]));
        assert_eq!(t.len(), 2);
        assert!(t.delete(0));
        assert!(!t.delete(0));
        assert_eq!((t.get(0), t.len()), (None, 1));
        assert_eq!(t.append(person(3, "c", 3)), Ok(2), "tids are not reused");
        assert!(t.get(u64::MAX).is_none() && !t.delete(u64::MAX));
        assert!(!t.key_of(0, &mut vec![1]));
    }

    #[test]
    fn many_rows_cross_chunks_and_purge_frees_memory() {
        let mut t = people();
        let empty = t.memory_bytes();
        let row_bytes = 100 + 4 * size_of::<Value>();
        for i in 0..1000 {
            assert_eq!(t.append(person(i, &"x".repeat(100), 0)), Ok(i));
        }
        let full = t.memory_bytes();
        assert!(full >= empty + 1000 * row_bytes, "{full}");
        assert!((0..1000).all(|i| t.get(i).unwrap()[0] == U64(i)));
        assert!((0..1000).step_by(2).all(|i| t.delete(i)));
        assert_eq!(t.memory_bytes(), full, "deleted rows are held until purged");
        assert_eq!(t.purge_deleted(), 500);
        assert_eq!(t.purge_deleted(), 0);
        assert_eq!(full - t.memory_bytes(), 500 * row_bytes);
        assert_eq!((t.len(), t.get(2), t.get(3).is_some()), (500, None, true));
        assert!(!t.delete(2));
    }

    #[test]
    fn schema_errors() {
        use TableError::*;
        let t = people();
        let err = |row| t.append(row).unwrap_err().to_string();
        assert_eq!(
            err(vec![]),
            "the row has 0 values but the schema has 4 columns"
        );
        let mut row = person(1, "a", 1);
        row[3] = U64(1);
        assert_eq!(err(row), "column 3 (delta) holds i64, got u64");
        assert_eq!(
            (t.len(), t.tid_bound()),
            (0, 0),
            "rejected rows change nothing"
        );
        let dup = Schema::new([("a", KeyType::U64), ("a", KeyType::Str)]);
        assert_eq!(dup, Err(DuplicateColumn("a".into())));
        assert_eq!(Schema::new(Vec::<(String, KeyType)>::new()), Err(Empty));
        let s = Schema::new([("a", KeyType::U64)]).unwrap();
        let table = |key: &[&str]| Table::new(s.clone(), key).unwrap_err();
        assert_eq!(table(&[]), Empty);
        assert_eq!(table(&["b"]), UnknownColumn("b".into()));
        assert_eq!(table(&["a", "a"]), DuplicateColumn("a".into()));
        let wrong_key = t.encode_key(&[U64(1)], &mut Vec::new());
        assert_eq!(
            wrong_key,
            Err(Arity {
                expected: 2,
                found: 1
            })
        );
    }

    #[test]
    fn keys_follow_the_key_encoding_and_order() {
        let t = people();
        let rows = [("b", -1), ("a", 5), ("a\0", -9), ("a", -5), ("", 0)];
        let mut keys = Vec::new();
        for (i, &(name, delta)) in rows.iter().enumerate() {
            let tid = t.append(person(i as u64, name, delta)).unwrap();
            let (mut k, mut by_values) = (Vec::new(), Vec::new());
            assert!(t.key(tid, &mut k));
            assert_eq!(k, key_of_person(name, delta));
            let parts = vec![Str(name.into()), I64(delta)];
            t.encode_key(&parts, &mut by_values).unwrap();
            assert_eq!(by_values, k);
            assert_eq!(t.decode_key(&k).unwrap(), parts);
            keys.push((k, parts));
        }
        keys.sort();
        assert!(
            keys.windows(2).all(|w| w[0].1 < w[1].1),
            "byte order = value order"
        );

        let schema = Schema::new([("name", KeyType::Bytes), ("n", KeyType::U64)]).unwrap();
        let single = Table::new(schema, &["name"]).unwrap();
        let tid = single
            .append(vec![Bytes(b"a\0b".to_vec()), U64(1)])
            .unwrap();
        let mut k = Vec::new();
        assert!(single.key_of(tid, &mut k));
        assert_eq!(k, b"a\0b", "one key column: raw single format");
        assert_eq!(single.decode_key(&k).unwrap(), [Bytes(b"a\0b".to_vec())]);
    }

    #[test]
    fn other_key_sources() {
        let keys = vec![b"x".to_vec(), b"yy".to_vec()];
        let mut out = vec![9];
        assert!(keys.key(1, &mut out) && out == b"yy");
        assert!(!keys.key(2, &mut out) && out.is_empty());
        let f = FnKeySource(|tid: u64, out: &mut Vec<u8>| {
            out.extend_from_slice(&key::encode_u64(tid));
            tid < 10
        });
        let shared: Arc<dyn KeySource> = Arc::new(f);
        assert!(shared.key(3, &mut out) && out == key::encode_u64(3));
        assert!(!shared.key(10, &mut out) && out.is_empty());
    }

    #[test]
    fn concurrent_readers_while_a_writer_appends() {
        const ROWS: u64 = 20_000;
        let t = people();
        let published = AtomicU64::new(0);
        let stop = elastree_testkit::StopFlag::new();
        thread::scope(|s| {
            // Set after the writer's last store (or when it panics: a failing writer stops
            // the readers instead of leaving them spinning), so a reader that sees it loads
            // `published` afterwards and still checks the final count.
            let _stop = stop.set_on_drop();
            for r in 0..4u64 {
                let (t, published, stop) = (&t, &published, &stop);
                s.spawn(move || {
                    let (mut out, mut probe) = (Vec::new(), r);
                    loop {
                        let stopping = stop.is_set();
                        let done = published.load(Ordering::Acquire);
                        // Every published row is visible with its full contents.
                        probe = (probe * 31 + 7) % (done + 1);
                        if probe < done {
                            assert!(t.key(probe, &mut out), "row {probe} of {done} missing");
                            assert_eq!(out, key_of_person(&format!("k{probe}"), -1));
                        }
                        // Rows past the published count may or may not be there yet.
                        if let Some(row) = t.get(done + 3) {
                            assert_eq!(row, &person(done + 3, &format!("k{}", done + 3), -1));
                        }
                        if done == ROWS || stopping {
                            break;
                        }
                        // Four readers and the writer share two cores on a small machine:
                        // let the writer run.
                        thread::yield_now();
                    }
                });
            }
            for i in 0..ROWS {
                assert_eq!(t.append(person(i, &format!("k{i}"), -1)), Ok(i));
                published.store(i + 1, Ordering::Release);
            }
        });
        assert_eq!(t.len(), ROWS as usize);
    }

    #[test]
    fn concurrent_appenders_get_distinct_tids() {
        let t = people();
        thread::scope(|s| {
            for w in 0..4 {
                let t = &t;
                s.spawn(move || {
                    for i in 0..2_000 {
                        let tid = t.append(person(w, "w", i)).unwrap();
                        assert!(i % 3 != 0 || t.delete(tid));
                    }
                });
            }
        });
        let mut seen = [0usize; 4];
        for row in (0..t.tid_bound()).filter_map(|tid| t.get(tid)) {
            seen[(0..4).position(|w| row[0] == U64(w)).unwrap()] += 1;
        }
        assert_eq!(seen, [1333; 4]);
        assert_eq!((t.len(), t.tid_bound()), (4 * 1333, 8000));
    }

    #[test]
    fn table_is_shareable() {
        fn check<T: Send + Sync>() {}
        check::<Table>();
        let _: &dyn KeySource = &people();
    }

    #[test]
    fn locate_covers_every_tid() {
        assert_eq!(locate(0), Some((0, 0)));
        assert_eq!(locate(63), Some((0, 63)));
        assert_eq!(locate(64), Some((1, 0)));
        assert_eq!(locate(191), Some((1, 127)));
        assert_eq!(locate(192), Some((2, 0)));
        assert_eq!((locate(u64::MAX), CHUNKS), (Some((58, 63)), 59));
    }
}
