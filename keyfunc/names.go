package keyfunc

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultMaxNames is the number of names Func.Names derives at most from
// one request when it is given no bound: enough for an order's items or a
// transfer's accounts, few enough that one request cannot make the store
// take thousands of keys.
const DefaultMaxNames = 64

// ErrTooMany means a key yields more names than its bound (Func.Names's
// max): a request with too many items. Adapters answer it as the client's
// fault (HTTP 400, gRPC InvalidArgument).
var ErrTooMany = errors.New("keyfunc: too many lock names")

// ErrMultiple means a key that yields several names (All, a field path with
// "[*]") was called as a plain Func, which gives one name: derive its names
// with Func.Names. It is a set-up mistake, not a bad request.
var ErrMultiple = errors.New("keyfunc: the key yields several names; derive them with Func.Names")

// ArraySource is a Source that also gives every item of an array field, for
// keys with a "[*]" path (see Field). HTTPSource and JSONBody are
// ArraySources; a Source that is not one makes such a key fail with
// ErrUnsupported.
type ArraySource interface {
	Source
	// Fields returns the items of the array field that path names, one
	// "[*]" segment marking the array ("items[*].id", "ids[*]"): each
	// item's value at the rest of the path, raw, as Field gives a scalar,
	// "" for an item that lacks it. An absent or null array gives none.
	// An array of something else than scalars at the rest of the path,
	// or a field that is not an array, is an error wrapping
	// ErrUnreadable.
	Fields(path string) ([]string, error)
}

// Names returns the names f derives from s, without repeats, in the order
// f derives them: one name for most keys; one per item for a key with a
// "[*]" field path, one per key of All, and every combination when a key
// has several such parts. The adapters take the names with one
// core.Locker.AcquireAll when there are several, with Acquire when there
// is one.
//
// max bounds the names (DefaultMaxNames when max <= 0), counting repeats:
// a key that would yield more fails with an error wrapping ErrTooMany, an
// array field with more items than max at once. Every error of f is
// returned as it is: a missing or empty item is an error wrapping
// ErrMissing, as a missing part is.
//
// A key that yields one name runs once, on s itself, as a plain Func does;
// only one that yields several runs again, on a Source that wraps s.
func (f Func) Names(s Source, max int) ([]string, error) {
	name, names, err := f.Derive(s, max)
	if err == nil && names == nil {
		return []string{name}, nil
	}
	return names, err
}

// Derive is Names for a caller that takes one name apart from several, as
// the adapters do on every request: a key that yields one name returns it
// as name, with names nil, without the slice Names puts it in; a key that
// yields several returns them as names, with name "". Its bound and errors
// are Names's.
func (f Func) Derive(s Source, max int) (name string, names []string, err error) {
	name, err = f(s)
	switch {
	case err == nil:
		return name, nil, nil
	case !errors.Is(err, ErrMultiple):
		return "", nil, err
	}
	names, err = f.several(s, max)
	return "", names, err
}

// several is Names for a key that yields several names (its plain run on s
// failed with ErrMultiple).
func (f Func) several(s Source, max int) ([]string, error) {
	if max <= 0 {
		max = DefaultMaxNames
	}
	e := &expander{Source: s, max: max}
	var names []string
	seen := map[string]bool{}
	for runs := 0; ; runs++ {
		if runs == max {
			return nil, fmt.Errorf("%w: the key yields more than %d names", ErrTooMany, max)
		}
		e.pos = 0
		name, err := f(e)
		if err != nil {
			return nil, err
		}
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
		if !e.next() {
			return names, nil
		}
	}
}

// expander is the Source that Func.Names passes to a key: it walks the
// choices of the key's several-names parts (All, "[*]" fields) one
// combination per run of the key, as an odometer, the last choice point
// turning fastest. A choice point of a later run may depend on the
// choices before it (an All of keys with different arrays): the choices
// after the one that advances are found afresh.
type expander struct {
	Source
	max     int
	choices []int // the alternative taken at each choice point of the run, in the order visited
	counts  []int // the number of alternatives at each
	pos     int   // the choice point the run visits next
	fields  map[string]fieldsResult
}

type fieldsResult struct {
	items []string
	err   error
}

// choose returns the alternative to take, of n, at the run's next choice
// point.
func (e *expander) choose(n int) (int, error) {
	if n > e.max {
		return 0, fmt.Errorf("%w: the key yields more than %d names", ErrTooMany, e.max)
	}
	if e.pos == len(e.choices) {
		e.choices, e.counts = append(e.choices, 0), append(e.counts, n)
	}
	e.counts[e.pos] = n
	c := e.choices[e.pos]
	e.pos++
	if c >= n { // only a key whose parts change between runs gets here
		return 0, fmt.Errorf("keyfunc: the key gave %d alternatives where it gave more before: it is not deterministic", n)
	}
	return c, nil
}

// next moves to the next combination, and reports whether there is one.
func (e *expander) next() bool {
	e.choices, e.counts = e.choices[:e.pos], e.counts[:e.pos]
	for i := len(e.choices) - 1; i >= 0; i-- {
		if e.choices[i]+1 < e.counts[i] {
			e.choices[i]++
			e.choices, e.counts = e.choices[:i+1], e.counts[:i+1]
			return true
		}
	}
	return false
}

// Fields gives the items of the wrapped Source, once per path.
func (e *expander) Fields(path string) ([]string, error) {
	if r, ok := e.fields[path]; ok {
		return r.items, r.err
	}
	items, err := fields(e.Source, path)
	if e.fields == nil {
		e.fields = map[string]fieldsResult{}
	}
	e.fields[path] = fieldsResult{items, err}
	return items, err
}

// fields asks s for the items of path.
func fields(s Source, path string) ([]string, error) {
	a, ok := s.(ArraySource)
	if !ok {
		return nil, fmt.Errorf("%w: the Source cannot give the items of an array field", ErrUnsupported)
	}
	return a.Fields(path)
}

// choose returns the alternative to take, of n (n >= 1), at a choice point
// of a key run on s: the expander's choice under Func.Names; the only one
// on another Source, where more than one is ErrMultiple.
func choose(s Source, n int, what string) (int, error) {
	if e, ok := s.(*expander); ok {
		return e.choose(n)
	}
	if n > 1 {
		return 0, fmt.Errorf("%w (%s)", ErrMultiple, what)
	}
	return 0, nil
}

// All returns a key that yields the names of every one of keys: a transfer
// between two orders locks both,
//
//	keyfunc.All(keyfunc.Join(keyfunc.Const("order"), keyfunc.Param("from")),
//		keyfunc.Join(keyfunc.Const("order"), keyfunc.Param("to")))
//
// which Templates writes shorter. Derive its names with Func.Names (the
// adapters do); called as a plain Func it gives its only key's name, and
// fails with ErrMultiple when it has several. A name that two keys give is
// taken once.
func All(keys ...Func) Func {
	if len(keys) == 0 {
		return invalid(errors.New("keyfunc: All: no keys"))
	}
	for i, k := range keys {
		if k == nil {
			return invalid(fmt.Errorf("keyfunc: All: key %d is nil", i))
		}
	}
	return func(s Source) (string, error) {
		i, err := choose(s, len(keys), fmt.Sprintf("All of %d keys", len(keys)))
		if err != nil {
			return "", err
		}
		return keys[i](s)
	}
}

// Templates parses each of ts (see Template) and returns their All: a key
// that yields one name per template,
//
//	keyfunc.Templates("order:{param.from}", "order:{param.to}")
//
// The error names the template that does not parse.
func Templates(ts ...string) (Func, error) {
	if len(ts) == 0 {
		return nil, fmt.Errorf("%w: no templates", ErrTemplate)
	}
	keys := make([]Func, len(ts))
	for i, t := range ts {
		k, err := Template(t)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	return All(keys...), nil
}

// items returns a Func giving each item of the array field that path (with
// one "[*]" segment) names, one per choice.
func items(path string) Func {
	return func(s Source) (string, error) {
		var vs []string
		var err error
		if e, ok := s.(*expander); ok {
			vs, err = e.Fields(path)
		} else {
			vs, err = fields(s, path)
		}
		if err != nil {
			return "", fmt.Errorf("%w (field %q)", err, path)
		}
		if len(vs) == 0 {
			return "", fmt.Errorf("%w: field %q: no items", ErrMissing, path)
		}
		for i, v := range vs {
			if v == "" {
				return "", fmt.Errorf("%w: field %q: item %d is empty", ErrMissing, path, i)
			}
		}
		i, err := choose(s, len(vs), fmt.Sprintf("%d items of field %q", len(vs), path))
		if err != nil {
			return "", err
		}
		return Escape(vs[i]), nil
	}
}

// arrayMark ends the segment of a field path that names an array whose
// items a key expands.
const arrayMark = "[*]"

// splitArray splits a path with one "[*]" into the array's path and the
// rest ("items[*].id" → "items", "id"); ok is false for a path without.
func splitArray(path string) (array, rest string, ok bool) {
	array, rest, ok = strings.Cut(path, arrayMark)
	rest = strings.TrimPrefix(rest, ".")
	return array, rest, ok
}
