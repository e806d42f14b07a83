//! (scenarios of this part of admission land here)
