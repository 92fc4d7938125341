package sqlstore

import (
	"testing"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/store/storetest"
)

// TestClaimStoreConformance runs store/storetest's suite for claim.Store,
// claim.Membership and claim.HeartbeatActiver on both databases.
func TestClaimStoreConformance(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			storetest.TestClaimStore(t, func(t *testing.T) (claim.Store, claim.Membership, storetest.ClaimAdmin) {
				db := b.open(t)
				return db.Deployments(), db.Membership(), admin{db}
			})
		})
	}
}
