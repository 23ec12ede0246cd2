#include "fakeffi.h"
int main(void){return 0;}
