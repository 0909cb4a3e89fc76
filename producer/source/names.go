package source

import "strings"

// names is a list of strings kept as one byte slab and the end of each:
// about its bytes plus 8 a name, where a []string costs a 16-byte header
// and an allocation (rounded up to its size class) a name. A folder of
// 1.28 million files keeps its paths this way.
type names struct {
	buf  []byte
	ends []uint64
}

// add appends s.
func (n *names) add(s string) {
	n.buf = append(n.buf, s...)
	n.ends = append(n.ends, uint64(len(n.buf)))
}

// addAll appends every name of m.
func (n *names) addAll(m names) {
	base := uint64(len(n.buf))
	n.buf = append(n.buf, m.buf...)
	for _, e := range m.ends {
		n.ends = append(n.ends, base+e)
	}
}

// len is how many names there are.
func (n names) len() int { return len(n.ends) }

// at is name i, as a new string (prefix before it).
func (n names) at(prefix string, i int) string {
	start := uint64(0)
	if i > 0 {
		start = n.ends[i-1]
	}
	var b strings.Builder
	b.Grow(len(prefix) + int(n.ends[i]-start))
	b.WriteString(prefix)
	b.Write(n.buf[start:n.ends[i]])
	return b.String()
}

// clip makes later appends copy, so that a list published to readers
// never changes under them.
func (n names) clip() names {
	return names{buf: n.buf[:len(n.buf):len(n.buf)], ends: n.ends[:len(n.ends):len(n.ends)]}
}
