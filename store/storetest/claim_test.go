package storetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
	"github.com/ksana-dev/ksana/store/storetest"
)

// memAdmin adapts claimtest.Store to storetest.ClaimAdmin.
type memAdmin struct{ s *claimtest.Store }

func (a memAdmin) PutDeployment(ctx context.Context, d claim.Deployment) error {
	a.s.Put(d)
	return nil
}

func (a memAdmin) GetDeployment(ctx context.Context, id string) (claim.Deployment, error) {
	return a.s.Get(id)
}

func (a memAdmin) BackdateNode(ctx context.Context, address string, age time.Duration) error {
	a.s.Backdate(address, age)
	return nil
}

func TestClaimStoreInMemory(t *testing.T) {
	t.Parallel()
	storetest.TestClaimStore(t, func(t *testing.T) (claim.Store, claim.Membership, storetest.ClaimAdmin) {
		s := claimtest.NewStore()
		return s, s, memAdmin{s}
	})
}

func TestClaimStoreInMemoryView(t *testing.T) {
	t.Parallel()
	storetest.TestClaimStore(t, func(t *testing.T) (claim.Store, claim.Membership, storetest.ClaimAdmin) {
		s := claimtest.NewStore()
		return claimtest.Viewing(s), s, memAdmin{s}
	})
}
