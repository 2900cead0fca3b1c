/**
 * A minimal reader of Arrow IPC streams, for the columns the scalars endpoint sends (docs/server.md):
 * int32/int64 and float32/float64 columns, utf8, and utf8 dictionaries with int32 indices. The
 * metadata is flatbuffers; only the fields named here are read. Anything else (compressed bodies,
 * delta dictionaries, big-endian streams, other types) is an error, so a caller can fall back to JSON.
 * Numbers come out as Float64Arrays (int64 steps above 2^53 round, as in JSON); nulls as NaN;
 * dictionary columns as indices (-1 for null) into their values.
 */

/** A dictionary-encoded column stays encoded: its values once, an index per row. */
export interface DictionaryColumn {
  indices: Int32Array;
  dictionary: string[];
}

export type ArrowColumn = Float64Array | string[] | DictionaryColumn;

export interface ArrowTable {
  names: string[];
  columns: ArrowColumn[];
  numRows: number;
  metadata: Map<string, string>;
}

// Message header union (Message.fbs) and Type union (Schema.fbs) tags.
const HEADER_SCHEMA = 1;
const HEADER_DICTIONARY_BATCH = 2;
const HEADER_RECORD_BATCH = 3;
const TYPE_INT = 2;
const TYPE_FLOAT = 3;
const TYPE_UTF8 = 5;

type NumberType = { kind: "int"; bits: number; signed: boolean } | { kind: "float"; bits: number };
type FieldType = NumberType | { kind: "utf8" };
interface Field {
  name: string;
  type: FieldType;
  dictionary: { id: number; indexBits: number } | null;
}

const utf8 = new TextDecoder();

/** Read access to one flatbuffer: tables by position, fields by their index in the schema. */
class Fb {
  constructor(
    readonly v: DataView,
    readonly base: number,
  ) {}
  root(): number {
    return this.base + this.v.getUint32(this.base, true);
  }
  /** The position of field `i` of the table at `t`, or 0 when absent (its default applies). */
  field(t: number, i: number): number {
    const vt = t - this.v.getInt32(t, true);
    const vtSize = this.v.getUint16(vt, true);
    if (4 + 2 * i >= vtSize) return 0;
    const off = this.v.getUint16(vt + 4 + 2 * i, true);
    return off ? t + off : 0;
  }
  ref(p: number): number {
    return p + this.v.getUint32(p, true);
  }
  table(t: number, i: number): number {
    const p = this.field(t, i);
    return p ? this.ref(p) : 0;
  }
  u8(t: number, i: number, dflt = 0): number {
    const p = this.field(t, i);
    return p ? this.v.getUint8(p) : dflt;
  }
  i16(t: number, i: number, dflt = 0): number {
    const p = this.field(t, i);
    return p ? this.v.getInt16(p, true) : dflt;
  }
  i32(t: number, i: number, dflt = 0): number {
    const p = this.field(t, i);
    return p ? this.v.getInt32(p, true) : dflt;
  }
  i64(t: number, i: number): number {
    const p = this.field(t, i);
    return p ? Number(this.v.getBigInt64(p, true)) : 0;
  }
  str(t: number, i: number): string | null {
    const p = this.field(t, i);
    if (!p) return null;
    const s = this.ref(p);
    return utf8.decode(new Uint8Array(this.v.buffer, this.v.byteOffset + s + 4, this.v.getUint32(s, true)));
  }
  /** A vector field: its element count and the position of its first element. */
  vec(t: number, i: number): { n: number; at: number } {
    const p = this.field(t, i);
    if (!p) return { n: 0, at: 0 };
    const s = this.ref(p);
    return { n: this.v.getUint32(s, true), at: s + 4 };
  }
}

function fail(why: string): never {
  throw new Error(`Arrow IPC: ${why}`);
}

function readField(fb: Fb, f: number): Field {
  const typeTag = fb.u8(f, 2);
  const tt = fb.table(f, 3);
  let type: FieldType;
  if (typeTag === TYPE_INT) type = { kind: "int", bits: fb.i32(tt, 0), signed: fb.u8(tt, 1) !== 0 };
  else if (typeTag === TYPE_FLOAT) {
    const precision = fb.i16(tt, 0);
    if (precision === 0) fail("half floats are not supported");
    type = { kind: "float", bits: precision === 1 ? 32 : 64 };
  } else if (typeTag === TYPE_UTF8) type = { kind: "utf8" };
  else fail(`column type ${typeTag} is not supported`);
  const d = fb.table(f, 4);
  let dictionary: Field["dictionary"] = null;
  if (d) {
    const it = fb.table(d, 1);
    dictionary = { id: fb.i64(d, 0), indexBits: it ? fb.i32(it, 0) : 32 };
    if (dictionary.indexBits !== 32) fail("only int32 dictionary indices are supported");
  }
  return { name: fb.str(f, 0) ?? "", type, dictionary };
}

/** A record batch's body, consumed one column at a time in schema order. */
class Batch {
  private node = 0;
  private buf = 0;
  readonly length: number;
  constructor(
    private readonly fb: Fb,
    private readonly rb: number,
    private readonly body: number,
  ) {
    this.length = fb.i64(rb, 0);
    if (fb.table(rb, 3)) fail("compressed bodies are not supported");
  }
  nextNode(): { length: number; nulls: number } {
    const { n, at } = this.fb.vec(this.rb, 1);
    if (this.node >= n) fail("fewer field nodes than columns");
    const p = at + 16 * this.node++;
    return { length: Number(this.fb.v.getBigInt64(p, true)), nulls: Number(this.fb.v.getBigInt64(p + 8, true)) };
  }
  nextBuffer(): { at: number; length: number } {
    const { n, at } = this.fb.vec(this.rb, 2);
    if (this.buf >= n) fail("fewer buffers than columns need");
    const p = at + 16 * this.buf++;
    return { at: this.body + Number(this.fb.v.getBigInt64(p, true)), length: Number(this.fb.v.getBigInt64(p + 8, true)) };
  }
}

function valid(v: DataView, validity: { at: number; length: number }, nulls: number, i: number): boolean {
  if (nulls === 0 || validity.length === 0) return true;
  return ((v.getUint8(validity.at + (i >> 3)) >> (i & 7)) & 1) === 1;
}

function readNumbers(v: DataView, batch: Batch, type: NumberType): Float64Array {
  const { length, nulls } = batch.nextNode();
  const validity = batch.nextBuffer();
  const data = batch.nextBuffer();
  const size = type.bits / 8;
  if (data.length < length * size) fail("a data buffer is shorter than its column");
  const out = new Float64Array(length);
  const abs = v.byteOffset + data.at;
  if (type.kind === "float" && type.bits === 64 && abs % 8 === 0) out.set(new Float64Array(v.buffer, abs, length));
  else if (type.kind === "int" && type.bits === 64 && abs % 4 === 0) {
    // Two 32-bit halves, not a BigInt per value: exact up to 2^53, rounded beyond as in JSON.
    const lo = new Uint32Array(v.buffer, abs, 2 * length);
    const hi = type.signed ? new Int32Array(v.buffer, abs, 2 * length) : lo;
    for (let i = 0; i < length; i++) out[i] = hi[2 * i + 1]! * 4294967296 + lo[2 * i]!;
  } else {
    for (let i = 0; i < length; i++) {
      const p = data.at + i * size;
      if (type.kind === "float") out[i] = type.bits === 64 ? v.getFloat64(p, true) : v.getFloat32(p, true);
      else if (type.bits === 64) out[i] = (type.signed ? v.getInt32(p + 4, true) : v.getUint32(p + 4, true)) * 4294967296 + v.getUint32(p, true);
      else if (type.bits === 32) out[i] = type.signed ? v.getInt32(p, true) : v.getUint32(p, true);
      else if (type.bits === 16) out[i] = type.signed ? v.getInt16(p, true) : v.getUint16(p, true);
      else out[i] = type.signed ? v.getInt8(p) : v.getUint8(p);
    }
  }
  if (nulls > 0) for (let i = 0; i < length; i++) if (!valid(v, validity, nulls, i)) out[i] = NaN;
  return out;
}

function readStrings(v: DataView, batch: Batch): string[] {
  const { length, nulls } = batch.nextNode();
  const validity = batch.nextBuffer();
  const offsets = batch.nextBuffer();
  const data = batch.nextBuffer();
  const bytes = new Uint8Array(v.buffer, v.byteOffset + data.at, data.length);
  const out = new Array<string>(length);
  for (let i = 0; i < length; i++) {
    const a = v.getInt32(offsets.at + 4 * i, true);
    const b = v.getInt32(offsets.at + 4 * i + 4, true);
    out[i] = valid(v, validity, nulls, i) ? utf8.decode(bytes.subarray(a, b)) : "";
  }
  return out;
}

function readIndices(v: DataView, batch: Batch, dictionary: string[]): DictionaryColumn {
  const { length, nulls } = batch.nextNode();
  const validity = batch.nextBuffer();
  const data = batch.nextBuffer();
  const abs = v.byteOffset + data.at;
  const indices = abs % 4 === 0 ? new Int32Array(v.buffer.slice(abs, abs + 4 * length)) : new Int32Array(length);
  for (let i = 0; i < length; i++) {
    const k = abs % 4 === 0 ? indices[i]! : v.getInt32(data.at + 4 * i, true);
    if (!valid(v, validity, nulls, i)) indices[i] = -1;
    else if (k < 0 || k >= dictionary.length) fail(`dictionary index ${k} out of range`);
    else indices[i] = k;
  }
  return { indices, dictionary };
}

function readColumn(v: DataView, batch: Batch, field: Field, dicts: Map<number, string[]>): ArrowColumn {
  if (field.dictionary) {
    const dict = dicts.get(field.dictionary.id) ?? fail(`dictionary ${field.dictionary.id} arrives after its batch`);
    return readIndices(v, batch, dict);
  }
  return field.type.kind === "utf8" ? readStrings(v, batch) : readNumbers(v, batch, field.type);
}

/** Every record batch of an IPC stream, concatenated into one table. */
export function readArrowStream(bytes: ArrayBuffer | Uint8Array): ArrowTable {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const v = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  let pos = 0;
  let fields: Field[] | null = null;
  const metadata = new Map<string, string>();
  const dicts = new Map<number, string[]>();
  const parts: ArrowColumn[][] = [];
  let numRows = 0;
  while (pos + 4 <= v.byteLength) {
    let len = v.getInt32(pos, true);
    pos += 4;
    // Since Arrow 0.15 a message starts with 0xFFFFFFFF then its length; before, the length alone.
    if (len === -1) {
      if (pos + 4 > v.byteLength) fail("the stream ends inside a message's length");
      len = v.getInt32(pos, true);
      pos += 4;
    }
    if (len === 0) break; // end of stream
    if (len < 0 || pos + len > v.byteLength) fail("a message's length runs past the end of the stream");
    const fb = new Fb(v, pos);
    const msg = fb.root();
    const headerType = fb.u8(msg, 1);
    const header = fb.table(msg, 2);
    const bodyLength = fb.i64(msg, 3);
    const body = pos + len;
    if (body + bodyLength > v.byteLength) fail("a message's body runs past the end of the stream");
    if (headerType === HEADER_SCHEMA) {
      if (fb.i16(header, 0) !== 0) fail("big-endian streams are not supported");
      const fv = fb.vec(header, 1);
      fields = [];
      for (let i = 0; i < fv.n; i++) fields.push(readField(fb, fb.ref(fv.at + 4 * i)));
      const kv = fb.vec(header, 2);
      for (let i = 0; i < kv.n; i++) {
        const t = fb.ref(kv.at + 4 * i);
        metadata.set(fb.str(t, 0) ?? "", fb.str(t, 1) ?? "");
      }
    } else if (headerType === HEADER_DICTIONARY_BATCH) {
      if (fb.u8(header, 2) !== 0) fail("delta dictionaries are not supported");
      const id = fb.i64(header, 0);
      const batch = new Batch(fb, fb.table(header, 1), body);
      dicts.set(id, readStrings(v, batch));
    } else if (headerType === HEADER_RECORD_BATCH) {
      if (!fields) fail("a record batch before the schema");
      const batch = new Batch(fb, header, body);
      parts.push(fields.map((f) => readColumn(v, batch, f, dicts)));
      numRows += batch.length;
    } else fail(`message type ${headerType} is not supported`);
    pos = body + bodyLength;
  }
  if (!fields) fail("no schema");
  const columns = fields.map((f, j): ArrowColumn => {
    if (f.dictionary) {
      const indices = new Int32Array(numRows);
      let at = 0;
      for (const p of parts) {
        const c = p[j] as DictionaryColumn;
        indices.set(c.indices, at);
        at += c.indices.length;
      }
      return { indices, dictionary: dicts.get(f.dictionary.id) ?? [] };
    }
    if (f.type.kind === "utf8") return parts.flatMap((p) => p[j] as string[]);
    const out = new Float64Array(numRows);
    let at = 0;
    for (const p of parts) {
      out.set(p[j] as Float64Array, at);
      at += (p[j] as Float64Array).length;
    }
    return out;
  });
  return { names: fields.map((f) => f.name), columns, numRows, metadata };
}
