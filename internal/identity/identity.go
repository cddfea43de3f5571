// Package identity makes and checks candidate identities: the default one
// New gives a candidate whose Options.Identity is empty (the host name and
// 64 random bits), the random instance name of each Elector, and the
// check of an identity the API server would store altered or that relect
// reserves. It knows no election; the root package imports it.
package identity

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/relect/relect/internal/leaserecord"
	"github.com/relect/relect/internal/problem"
)

// MaxLen is the longest identity the API server stores, in bytes.
const MaxLen = 253

// Default is the host name plus 64 random bits, so that two processes
// sharing a host name (host-network pods of one node) never share an
// identity; its last MaxLen bytes if longer.
func Default() (string, error) {
	suffix, err := RandomHex()
	if err != nil {
		return "", fmt.Errorf("relect: generating a default Identity: %w", err)
	}
	id := host() + "_" + suffix
	if len(id) > MaxLen {
		id = id[len(id)-MaxLen:]
	}
	return id, nil
}

// DefaultLen is the length of the identity Default gives, as jsonLen
// measures the host name (the shard table's JSON: shards.JSONLen).
func DefaultLen(jsonLen func(string) int) int { return min(MaxLen, jsonLen(host())+1+16) }

// host is the host name a default identity starts with.
func host() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "relect"
	}
	return host
}

// RandomHex is 64 random bits in hex: 16 digits.
func RandomHex() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// Check reports to bad, as field's problem, an identity the API server
// would store altered, and one that relect uses itself, for client-go's
// eyes only, to stand for a holder that is not this candidate
// (leaserecord.Disguise): a candidate of that identity would take such a
// lease for its own.
func Check(field, id string, bad problem.Report) {
	switch {
	case !utf8.ValidString(id):
		bad(field, "%q is not valid UTF-8: the API server would store it altered, and "+
			"this candidate would not recognise the lease it holds", id)
	case id == leaserecord.EmptiedHolder || strings.HasSuffix(id, leaserecord.StrangerSuffix):
		bad(field, "%q is reserved: relect shows it to client-go in place of a holder that is not this candidate", id)
	}
}
