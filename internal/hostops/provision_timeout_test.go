package hostops_test

import (
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
)

// The bound the workflows give a provision is its steps' bounds together:
// a step's bound changed here must change the contract's too.
func TestProvisionTimeoutIsTheSumOfTheStepsBounds(t *testing.T) {
	var sum time.Duration
	for _, st := range hostops.ProvisionSteps {
		sum += st.Timeout
	}
	if sum != hostapi.ProvisionTimeout {
		t.Fatalf("the steps take up to %s; hostapi.ProvisionTimeout says %s", sum, hostapi.ProvisionTimeout)
	}
}
