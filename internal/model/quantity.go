package model

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
)

// quantityRe is the Kubernetes quantity grammar: a signed decimal number and
// an optional binary suffix, decimal suffix or exponent.
var quantityRe = regexp.MustCompile(`^([+-]?[0-9]+(?:\.[0-9]*)?|[+-]?\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$`)

var suffixes = map[string]*big.Rat{
	"":   big.NewRat(1, 1),
	"n":  big.NewRat(1, 1_000_000_000),
	"u":  big.NewRat(1, 1_000_000),
	"m":  big.NewRat(1, 1000),
	"k":  big.NewRat(1000, 1),
	"M":  big.NewRat(1_000_000, 1),
	"G":  big.NewRat(1_000_000_000, 1),
	"T":  big.NewRat(1_000_000_000_000, 1),
	"P":  big.NewRat(1_000_000_000_000_000, 1),
	"E":  big.NewRat(1_000_000_000_000_000_000, 1),
	"Ki": big.NewRat(1<<10, 1),
	"Mi": big.NewRat(1<<20, 1),
	"Gi": big.NewRat(1<<30, 1),
	"Ti": big.NewRat(1<<40, 1),
	"Pi": big.NewRat(1<<50, 1),
	"Ei": big.NewRat(1<<60, 1),
}

// Bounds of the amounts a spec may ask for. Kubernetes bounds a quantity
// only by its 64-bit form; these lie far above any host and keep the
// sums the scheduler makes over a node's pods and claims, and the
// thousandths ParseQuantity counts in, far from overflowing int64.
const (
	// MaxMilliCPU: a million cores.
	MaxMilliCPU int64 = 1_000_000 * 1000
	// MaxMemoryBytes: 1Pi of memory.
	MaxMemoryBytes int64 = 1 << 50
	// MaxStorageBytes: 1Pi for a claim, an emptyDir or an image.
	MaxStorageBytes int64 = 1 << 50
)

// quantityProblem says what is wrong with v as an amount of resource
// (cpu, memory or storage; another is only parsed), or "" when nothing
// is: it parses, is not negative, and is within its resource's bound.
func quantityProblem(resource, v string) string {
	q, err := ParseQuantity(v)
	switch {
	case err != nil:
		return fmt.Sprintf("Invalid value: %q: %v", v, err)
	case q < 0:
		return fmt.Sprintf("Invalid value: %q: must be greater than or equal to 0", v)
	}
	switch bytes := (q + 999) / 1000; resource {
	case ResourceCPU:
		if q > MaxMilliCPU {
			return fmt.Sprintf("Invalid value: %q: must be at most %d (cores)", v, MaxMilliCPU/1000)
		}
	case ResourceMemory:
		if bytes > MaxMemoryBytes {
			return fmt.Sprintf("Invalid value: %q: must be at most 1Pi", v)
		}
	case ResourceStorage, ResourceEphemeralStorage:
		if bytes > MaxStorageBytes {
			return fmt.Sprintf("Invalid value: %q: must be at most 1Pi", v)
		}
	}
	return ""
}

// ParseQuantity parses a Kubernetes quantity ("500m", "2Gi", "1.5", "1e3")
// and returns its value in thousandths, rounded up, so that CPU in
// millicores and memory in bytes (×1000) share one exact representation.
func ParseQuantity(s string) (milli int64, err error) {
	m := quantityRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
	}
	num, ok := new(big.Rat).SetString(m[1])
	if !ok {
		return 0, fmt.Errorf("invalid number %q", m[1])
	}
	mult, ok := suffixes[m[2]]
	if !ok { // an exponent
		var exp int
		if _, err := fmt.Sscanf(m[2][1:], "%d", &exp); err != nil || exp > 30 || exp < -30 {
			return 0, fmt.Errorf("invalid exponent %q", m[2])
		}
		mult = new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil))
		if exp < 0 {
			mult.Inv(mult)
		}
	}
	v := new(big.Rat).Mul(num, mult)
	v.Mul(v, big.NewRat(1000, 1))
	// Round up, as Kubernetes does, so a request is never understated.
	q, r := new(big.Int).QuoRem(v.Num(), v.Denom(), new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() || q.Int64() > math.MaxInt64/2 {
		return 0, fmt.Errorf("quantity %q is too large", s)
	}
	return q.Int64(), nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// MilliCPU returns a CPU quantity in millicores.
func MilliCPU(s string) (int64, error) { return ParseQuantity(s) }

// Bytes returns a memory quantity in bytes, rounded up.
func Bytes(s string) (int64, error) {
	m, err := ParseQuantity(s)
	if err != nil {
		return 0, err
	}
	return (m + 999) / 1000, nil
}
