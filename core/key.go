package core

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// MaxNameLen is the longest lock name used verbatim in a store key. Longer
// names are replaced by "sha256:" and the hex SHA-256 of the name, so that a
// key never grows with its input.
const MaxNameLen = 128

const hashedMark = "sha256:"

// Key returns the store key that guards name: the Locker's prefix followed by
// the name inside a cluster hash tag, as in "reqlock:{order:42}". Every
// companion key of a lock is built by appending to it, so all of them share
// the hash tag and live in one cluster slot.
//
// The name is used verbatim unless it is longer than MaxNameLen bytes,
// contains '{' or '}' (which would break the hash tag) or begins with
// "sha256:"; then its SHA-256 takes its place. An empty name is an error
// wrapping ErrInvalidName.
func (l *Locker) Key(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: the name is empty", ErrInvalidName)
	}
	if len(name) > MaxNameLen || strings.ContainsAny(name, "{}") || strings.HasPrefix(name, hashedMark) {
		sum := sha256.Sum256([]byte(name))
		name = hashedMark + hex.EncodeToString(sum[:])
	}
	return l.cfg.prefix + "{" + name + "}", nil
}
