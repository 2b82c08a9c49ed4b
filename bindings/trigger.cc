#include "conversions.h"
#include "init.h"

namespace pynenc_cpp::bindings {

void InitTrigger(py::module_& m) { (void)m; }

}  // namespace pynenc_cpp::bindings
