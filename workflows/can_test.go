package workflows

import "go.temporal.io/sdk/workflow"

type workflowContinueAsNew = workflow.ContinueAsNewError
