package rollout

import (
	"encoding/json"
	"hash/fnv"
	"strconv"

	"github.com/zonewright/zonewright/internal/model"
)

// alphanums are the characters Kubernetes' rand.SafeEncodeString maps
// to: no vowels and no look-alikes, so a hash never spells a word.
const alphanums = "bcdfghjklmnpqrstvwxz2456789"

// TemplateHash is the pod-template-hash of a template: FNV-32a over its
// JSON, encoded as Kubernetes encodes it (at most 10 characters).
func TemplateHash(t model.PodTemplate) string {
	b, _ := json.Marshal(t) // a template always marshals
	h := fnv.New32a()
	h.Write(b)
	digits := []byte(strconv.FormatUint(uint64(h.Sum32()), 10))
	for i, d := range digits {
		digits[i] = alphanums[int(d)%len(alphanums)]
	}
	return string(digits)
}
