// Package controlapi is the contract between the workflows and the
// control plane's activities: the activities' inputs and results, the
// error types the workflows match, and Activities and ImageActivities,
// stand-ins with the activities' method sets. The workflows name an
// activity by a method value of a stand-in (Temporal names an activity
// after its method), so they compile none of the control plane: its store,
// scheduler and image store. Types only: internal/controlops does the
// work, activities/control registers the activities, and a test there
// holds their method sets and the stand-ins' equal.
package controlapi
