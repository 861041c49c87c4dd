package controlapi

import (
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/transfer"
)

// ClaimMoveInput names one move of a claim.
type ClaimMoveInput struct {
	Target ClaimTarget
	MoveID string
}

// ClaimMovePlan is PlanClaimMove's answer.
type ClaimMovePlan struct {
	Move    *model.ClaimMove `json:",omitempty"`
	Message string           `json:",omitempty"`
}

// ClaimTransferInput names one stream of a move: step 1 the pre-copy,
// step 2 the final increment.
type ClaimTransferInput struct {
	Move ClaimMoveInput
	Step int
}

// ClaimTransferTickets are the source's upload and the destination's
// download of one stream.
type ClaimTransferTickets struct {
	Upload, Download transfer.Ticket
}
