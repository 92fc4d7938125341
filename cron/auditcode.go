package cron

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"time"
)

// auditCoder encodes the entries of one block of an [AuditBuffer], and
// decodes them, in order. An entry is:
//
//   - a flags byte (auditSame* for a who, role or action equal to the
//     previous entry's, which is then left out; auditReplay);
//   - the ID less the previous entry's (the first: less 0), and the time
//     as Unix seconds less the previous entry's and nanoseconds, as
//     varints;
//   - who, role and action unless the same: length and bytes;
//   - the fields job_id, run_id, overrides, before and after, each as 0
//     for nil (or ""), else 1 + its length, then its bytes compressed (an
//     id of 32 hex digits: 1 and its 16 bytes; see idField).
//
// The five fields of the block's entries, one after the other, make the
// block's stream. A field's bytes are sequences of a literal (its length,
// then the bytes) and, unless the field ends there, a copy of earlier
// bytes of the stream (its length less auditMinMatch, then how far back
// it starts): the JSON of a job repeats most of that of the entry
// before, and its id repeats the job_id.
type auditCoder struct {
	stream          []byte
	table           [1 << auditHashBits]int32 // a hash of 4 bytes -> their last position in stream + 1
	id, sec         int64
	who, role, actn string
	buf             []byte // the encoder's output, the open block's data
}

const (
	auditHashBits = 12
	auditMinMatch = 4
	auditSameWho  = 1 << iota
	auditSameRole
	auditSameAction
	auditReplay
)

// reset makes c ready for the first entry of a block.
func (c *auditCoder) reset() {
	c.stream = c.stream[:0]
	clear(c.table[:])
	c.id, c.sec = 0, 0
	c.who, c.role, c.actn = "", "", ""
}

// encode appends e, the next entry of the block, to dst.
func (c *auditCoder) encode(dst []byte, e *AuditEntry) []byte {
	var flags byte
	if e.Who == c.who {
		flags |= auditSameWho
	}
	if e.Role == c.role {
		flags |= auditSameRole
	}
	if string(e.Action) == c.actn {
		flags |= auditSameAction
	}
	if e.Replay {
		flags |= auditReplay
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(e.ID-c.id))
	sec := e.Time.Unix()
	dst = binary.AppendVarint(dst, sec-c.sec)
	dst = binary.AppendUvarint(dst, uint64(e.Time.Nanosecond()))
	c.id, c.sec = e.ID, sec
	if flags&auditSameWho == 0 {
		dst = appendString(dst, e.Who)
		c.who = e.Who
	}
	if flags&auditSameRole == 0 {
		dst = appendString(dst, e.Role)
		c.role = e.Role
	}
	if flags&auditSameAction == 0 {
		dst = appendString(dst, string(e.Action))
		c.actn = string(e.Action)
	}
	dst = c.idField(dst, e.JobID)
	dst = c.idField(dst, e.RunID)
	dst = c.field(dst, e.Overrides, e.Overrides != nil, 1)
	dst = c.field(dst, e.Before, e.Before != nil, 1)
	return c.field(dst, e.After, e.After != nil, 1)
}

// idField appends the code of job_id or run_id: 0 for "", 1 and 16 bytes
// for 32 lowercase hex digits (the ids the runner makes), else 2 + the
// length and its sequences. The stream gets the id as it is.
func (c *auditCoder) idField(dst []byte, id string) []byte {
	if len(id) != 32 || !isLowerHex(id) {
		return c.field(dst, []byte(id), id != "", 2)
	}
	dst = append(dst, 1)
	dst, _ = hex.AppendDecode(dst, []byte(id))
	base := len(c.stream)
	c.stream = append(c.stream, id...)
	// The JSON that follows holds the id after some bytes that repeat
	// earlier ones: a copy of those may take its first digits too.
	for q := base; q < base+4; q++ {
		c.table[c.hash(q)] = int32(q + 1)
	}
	return dst
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func (c *auditCoder) hash(p int) uint32 {
	return binary.LittleEndian.Uint32(c.stream[p:]) * 2654435761 >> (32 - auditHashBits)
}

// field appends the code of one field: 0 when absent, else bias + its
// length and its sequences (see auditCoder).
func (c *auditCoder) field(dst, b []byte, present bool, bias uint64) []byte {
	if !present {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b))+bias)
	base := len(c.stream)
	c.stream = append(c.stream, b...)
	end := len(c.stream)
	lit := base
	for p := base; p+auditMinMatch <= end; {
		h := c.hash(p)
		cand := int(c.table[h]) - 1
		c.table[h] = int32(p + 1)
		if cand < 0 || binary.LittleEndian.Uint32(c.stream[cand:]) != binary.LittleEndian.Uint32(c.stream[p:]) {
			p++
			continue
		}
		m := auditMinMatch
		for p+m+8 <= end && binary.LittleEndian.Uint64(c.stream[cand+m:]) == binary.LittleEndian.Uint64(c.stream[p+m:]) {
			m += 8
		}
		for p+m < end && c.stream[cand+m] == c.stream[p+m] {
			m++
		}
		dst = binary.AppendUvarint(dst, uint64(p-lit))
		dst = append(dst, c.stream[lit:p]...)
		dst = binary.AppendUvarint(dst, uint64(m-auditMinMatch))
		dst = binary.AppendUvarint(dst, uint64(p-cand))
		// The positions inside the copy are not hashed (the bytes they
		// start were hashed where they were copied from): the stream
		// of an entry like the last one is mostly copies, and hashing
		// each byte of them would cost more than the rest.
		if q := p + m - 1; q+auditMinMatch <= end {
			c.table[c.hash(q)] = int32(q + 1)
		}
		p += m
		lit = p
	}
	dst = binary.AppendUvarint(dst, uint64(end-lit))
	return append(dst, c.stream[lit:end]...)
}

// decode reads the next entry of the block from src into e and returns
// the rest of src. The JSON fields of e are in the coder's stream: valid
// until the coder is reset. The block was made by encode, so it is not
// checked.
func (c *auditCoder) decode(src []byte, e *AuditEntry) []byte {
	flags := src[0]
	src = src[1:]
	d, k := binary.Uvarint(src)
	src = src[k:]
	c.id += int64(d)
	e.ID = c.id
	ds, k := binary.Varint(src)
	src = src[k:]
	c.sec += ds
	ns, k := binary.Uvarint(src)
	src = src[k:]
	e.Time = time.Unix(c.sec, int64(ns)).UTC()
	if flags&auditSameWho == 0 {
		c.who, src = readString(src)
	}
	if flags&auditSameRole == 0 {
		c.role, src = readString(src)
	}
	if flags&auditSameAction == 0 {
		c.actn, src = readString(src)
	}
	e.Who, e.Role, e.Action = c.who, c.role, Action(c.actn)
	e.Replay = flags&auditReplay != 0
	e.JobID, src = c.idUnfield(src)
	e.RunID, src = c.idUnfield(src)
	e.Overrides, _, src = c.rawField(src)
	e.Before, _, src = c.rawField(src)
	e.After, _, src = c.rawField(src)
	return src
}

func readString(src []byte) (string, []byte) {
	n, k := binary.Uvarint(src)
	return string(src[k : k+int(n)]), src[k+int(n):]
}

// idUnfield reads a field of idField.
func (c *auditCoder) idUnfield(src []byte) (string, []byte) {
	switch src[0] {
	case 0:
		return "", src[1:]
	case 1:
		c.stream = hex.AppendEncode(c.stream, src[1:17])
		return string(c.stream[len(c.stream)-32:]), src[17:]
	}
	b, _, src := c.unfield(src, 2)
	return string(b), src
}

// rawField is unfield for a JSON field: its bytes in the stream (valid
// until the coder is reset), nil when absent, empty (not nil) when empty.
func (c *auditCoder) rawField(src []byte) (json.RawMessage, bool, []byte) {
	b, ok, src := c.unfield(src, 1)
	switch {
	case !ok:
		return nil, false, src
	case len(b) == 0:
		return json.RawMessage{}, true, src
	}
	return b, true, src
}

// cloneRaw returns a copy of m: nil for nil, empty (not nil) for empty.
func cloneRaw(m json.RawMessage) json.RawMessage {
	if m == nil {
		return nil
	}
	return append(make(json.RawMessage, 0, len(m)), m...)
}

// unfield reads one field and returns its bytes (in the stream, valid
// until the next call), whether it is present, and the rest of src.
func (c *auditCoder) unfield(src []byte, bias uint64) ([]byte, bool, []byte) {
	code, k := binary.Uvarint(src)
	src = src[k:]
	if code == 0 {
		return nil, false, src
	}
	n := int(code - bias)
	base := len(c.stream)
	end := base + n
	for {
		lit, k := binary.Uvarint(src)
		src = src[k:]
		c.stream = append(c.stream, src[:lit]...)
		src = src[lit:]
		if len(c.stream) == end {
			break
		}
		m, k := binary.Uvarint(src)
		src = src[k:]
		dist, k := binary.Uvarint(src)
		src = src[k:]
		from := len(c.stream) - int(dist)
		for i := range int(m) + auditMinMatch {
			c.stream = append(c.stream, c.stream[from+i])
		}
	}
	return c.stream[base:end], true, src
}
